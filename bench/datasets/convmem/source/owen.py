KEY, NAME, FIRST = "owen", "Owen Fitzgerald", "Owen"
NOW = "2026-04-28"

MEMORY = [
    "Owen Fitzgerald, 45, former secondary-school geography teacher in Cork, retraining as a GIS analyst.",
    "Finished a part-time GIS certificate at Munster Technological University in December 2025.",
    "Accepted an offer from Corrib Environmental in Galway: GIS analyst, 52,000 euros, starting 2026-06-01.",
    "Moving from Cork to Galway in May 2026; renting a two-bed flat in Salthill from 2026-05-20, 1,650 euros a month.",
    "Wife Siobhán is a nurse and has a transfer to University Hospital Galway; daughter Aoife (15) changes school.",
    "Prefers QGIS over ArcGIS; knows Python and PostGIS basics.",
]

SESSIONS = {
    "2026-01-12 20:45": """
U: I'm finally doing it, leaving teaching. Twenty years of geography and I want to work with maps for real, as a GIS analyst.
A: That's a brave move. What experience do you have so far?
U: I finished a part-time GIS certificate at Munster Technological University in December. I use QGIS, some Python and a bit of PostGIS.
A: Saved: GIS certificate from MTU, December 2025; skills QGIS, Python, PostGIS basics.
U: Teaching pays 58,000 now, I know I'll take a pay cut to start.
A: Noted your current salary of 58,000 euros. Entry GIS roles in Ireland are often lower, so the cut is realistic.
U: Can you help me track applications? I've sent three so far.
A: Sure. Tell me the companies and I'll keep a list with dates and stages.
U: Ordnance Survey Ireland, a wind farm developer called Gaoth Energy, and Corrib Environmental in Galway.
A: Saved three applications: Ordnance Survey Ireland, Gaoth Energy, Corrib Environmental.
""",
    "2026-02-09 18:30": """
U: Gaoth Energy rejected me, no interview. But Corrib Environmental invited me to a first interview on 2026-02-17.
A: Sorry about Gaoth, but Corrib is good news. Saved the Corrib interview on 2026-02-17.
U: They want a short portfolio. I'm thinking of my flood-risk map of the River Lee.
A: A flood-risk map is a strong piece for an environmental consultancy. Include your method and data sources.
U: I used the OPW flood data and the EPA river network.
A: Good, mention both datasets and what you did with them in QGIS.
""",
    "2026-03-06 21:00": """
U: Second interview at Corrib went well, they asked about PostGIS queries and I managed fine.
A: Great. Did they say when you'd hear back?
U: By the end of March. Ordnance Survey invited me for an assessment day on 2026-03-24 too.
A: Saved: Ordnance Survey assessment day on 2026-03-24; Corrib decision expected by end of March.
U: Siobhán says if it's Galway she could ask for a transfer to University Hospital Galway.
A: That would make a move much easier. Noted.
U: Aoife is not thrilled about changing school, she's fifteen and has her friends here.
A: Understandable at fifteen. Maybe visit Galway schools together so she has a say.
""",
    "2026-03-27 19:20": """
U: Corrib made an offer! GIS analyst, 49,000 euros, starting 2026-06-01.
A: Congratulations! Saved: Corrib Environmental offer, 49,000 euros, start 2026-06-01. Will you negotiate?
U: I'll ask for more, my teaching experience is worth something for their community consultations.
A: A fair argument. Presenting to the public is a real skill for consultancy work.
U: Ordnance Survey said no after the assessment day, so Corrib is the one.
A: Saved: Ordnance Survey declined after the assessment day.
""",
    "2026-04-27 20:10": """
U: They came back at 52,000 and I accepted! Signed the contract today.
A: Brilliant. Updated: accepted Corrib Environmental at 52,000 euros, starting 2026-06-01.
U: We found a flat in Salthill, two bedrooms, 1,650 a month, available from 2026-05-20.
A: Saved: rented flat in Salthill from 2026-05-20, 1,650 euros a month.
U: Siobhán's transfer to University Hospital Galway was approved too.
A: Wonderful, that's the big piece. Saved Siobhán's transfer.
U: Aoife visited Salerno Secondary and actually liked it, there's a rowing club.
A: That's a relief. Saved: Aoife liked Salerno Secondary, which has a rowing club.
""",
}

QUERIES = [
    ("single-hop", "Where did Owen do his GIS certificate?", [("Munster Technological University || MTU", "2026-01-12", "MEM")], []),
    ("single-hop", "Which GIS software does Owen use?", [("QGIS", "2026-01-12|I use QGIS || skills QGIS", "MEM")], []),
    ("single-hop", "Which company rejected Owen without an interview?", [("Gaoth Energy rejected", "2026-02-09")], []),
    ("single-hop", "When was Owen's first interview with Corrib?", [("2026-02-17", "2026-02-09")], []),
    ("single-hop", "What did Owen use for his portfolio piece?", [("flood-risk map", "2026-02-09|I'm thinking of my flood-risk")], []),
    ("single-hop", "When was the Ordnance Survey assessment day?", [("2026-03-24", "2026-03-06")], []),
    ("single-hop", "When does Owen start at Corrib Environmental?", [("2026-06-01", "2026-03-27", "2026-04-27", "MEM")], []),
    ("single-hop", "How much is the rent for the Salthill flat?", [("1,650", "2026-04-27", "MEM")], []),
    ("single-hop", "When can Owen's family move into the Salthill flat?", [("2026-05-20", "2026-04-27", "MEM")], []),
    ("single-hop", "Which school did Aoife visit in Galway?", [("Salerno Secondary", "2026-04-27")], []),
    ("single-hop", "How much does Owen earn as a teacher?", [("58,000", "2026-01-12")], []),
    ("single-hop", "How old is Aoife?", [("15 || fifteen", "2026-03-06|Aoife is not thrilled", "MEM")], []),
    ("paraphrase", "Which public datasets fed Owen's waterway hazard map?", [("OPW flood data", "2026-02-09")], []),
    ("paraphrase", "What did the follow-up panel quiz Owen on?", [("PostGIS queries", "2026-03-06")], []),
    ("paraphrase", "Why does Owen think he deserves a higher salary?", [("community consultations", "2026-03-27")], []),
    ("paraphrase", "How does Owen's teenager feel about relocating?", [("not thrilled", "2026-03-06")], []),
    ("paraphrase", "What made Owen's girl warm to the new school?", [("rowing club", "2026-04-27|Aoife visited")], []),
    ("paraphrase", "Will Owen's spouse keep her job after the relocation?", [("transfer to University Hospital Galway was approved", "2026-04-27")], []),
    ("paraphrase", "How long was Owen a classroom teacher?", [("Twenty years", "2026-01-12")], []),
    ("paraphrase", "Which national mapping agency turned Owen down?", [("Ordnance Survey said no", "2026-03-27")], []),
    ("temporal", "What salary will Owen earn at Corrib?", [("52,000", "2026-04-27", "MEM")], ["2026-03-27|49,000"]),
    ("temporal", "What is the status of Owen's Ordnance Survey application?", [("Ordnance Survey said no || Ordnance Survey declined", "2026-03-27")],
     ["2026-03-06|Ordnance Survey invited me", "2026-01-12|Ordnance Survey Ireland, a wind farm"]),
    ("temporal", "Has Siobhán's hospital transfer been approved?", [("approved", "2026-04-27|transfer to University Hospital Galway was approved")],
     ["2026-03-06|she could ask for a transfer"]),
    ("multi-hop", "How much of a pay cut does Owen take moving from teaching to Corrib?",
     [("58,000", "2026-01-12|Teaching pays"), ("52,000", "2026-04-27|They came back at 52,000")], []),
    ("multi-hop", "Of the three companies Owen applied to in January, which one hired him and which turned him down after an assessment?",
     [("Corrib made an offer", "2026-03-27"), ("Ordnance Survey said no", "2026-03-27"), ("Gaoth Energy", "2026-01-12|Ordnance Survey Ireland, a wind farm")], []),
    ("multi-hop", "How long after moving into the flat does Owen start his new job?",
     [("2026-05-20", "2026-04-27|We found a flat"), ("2026-06-01", "2026-04-27|Updated: accepted", "2026-03-27|Corrib made an offer")], []),
    ("multi-hop", "How much did Corrib raise its offer after Owen negotiated?",
     [("49,000", "2026-03-27|Corrib made an offer"), ("52,000", "2026-04-27|They came back")], []),
    ("negative", "What car does Owen drive?", [], []),
    ("negative", "Which university did Aoife apply to?", [], []),
    ("negative", "What was Owen's salary at Gaoth Energy?", [], [], "rejected, never employed"),
]
