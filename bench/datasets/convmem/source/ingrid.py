KEY, NAME, FIRST = "ingrid", "Ingrid Sørlie", "Ingrid"
NOW = "2026-06-12"

MEMORY = [
    "Ingrid Sørlie, engineering manager at Nordhavn Freight in Oslo; leads Project Lantern, the move of the warehouse scanning app from the old Java server to a mobile web app.",
    "Lantern go-live: 2026-09-14 (slipped from 2026-06-01, then from 2026-08-17).",
    "Team: Jonas (backend), Mei (frontend), Ravi (QA); Ravi leaves on parental leave in July, replaced by the contractor Elsa Brandt.",
    "Sponsor: Henrik Aas, VP Operations; weekly steering meeting on Wednesdays at 13:00 (moved from Mondays at 10:00).",
    "Vendor for handheld scanners: Zebrix; the TC-58 model was chosen over the cheaper TC-21.",
    "Budget 1.2 million NOK; 780,000 NOK spent by end of May 2026.",
    "Pilot warehouse: Gardermoen; second site Drammen after go-live.",
]

SESSIONS = {
    "2026-01-19 08:30": """
U: I need help keeping my head straight on Project Lantern. We're replacing the warehouse scanning app, the old Java server thing, with a mobile web app.
A: Happy to help. What is the scope and the deadline?
U: Go-live is planned for 2026-06-01 at the Gardermoen warehouse as the pilot. Budget is 1.2 million NOK.
A: Saved: Lantern, pilot at Gardermoen, go-live 2026-06-01, budget 1.2 million NOK.
U: Team is Jonas on backend, Mei on frontend and Ravi doing QA. Henrik Aas is the sponsor.
A: Noted the team and that Henrik Aas sponsors the project.
U: Steering meeting with Henrik is every Monday at 10:00.
A: Saved the weekly steering meeting: Mondays at 10:00.
""",
    "2026-02-23 16:10": """
U: We have to pick handheld scanners. Zebrix offers the TC-21 at 4,100 NOK or the TC-58 at 6,900 NOK each.
A: What does the TC-58 add for the extra money?
U: Better battery, it survives the freezer section at minus twenty, and the camera reads damaged barcodes.
A: For a cold store the freezer rating matters a lot. How many devices do you need?
U: Sixty for Gardermoen. We went with the TC-58, Henrik signed off.
A: Saved: 60 Zebrix TC-58 scanners for Gardermoen, chosen over the TC-21 for the freezer rating and battery.
U: Also Mei found the old app stores pallet weights in pounds, not kilos. Nobody knew.
A: Worth a data migration test. I'll add "convert pallet weights from pounds to kilos" to the migration checklist.
""",
    "2026-03-30 09:05": """
U: Bad week. The integration with the warehouse management system is late, the vendor's API isn't ready.
A: What does that mean for the go-live date?
U: We agreed with Henrik to move go-live to 2026-08-17.
A: Updated: Lantern go-live moved from 2026-06-01 to 2026-08-17 because of the warehouse system API delay.
U: And Henrik wants the steering meeting moved to Wednesdays at 13:00, Mondays are full for him.
A: Updated the steering meeting to Wednesdays at 13:00.
U: Jonas suggested we run the old and new app side by side for two weeks at the pilot site.
A: A parallel run lowers the risk. I'll note it as a proposal for the cutover plan.
""",
    "2026-05-28 18:45": """
U: Ravi told me he's going on parental leave from July, congratulations to him but it's a gap in QA.
A: Congratulations to Ravi. Have you found cover?
U: We're hiring a contractor, Elsa Brandt, she did QA for a logistics app at her last gig. Starts 2026-06-22.
A: Saved: Elsa Brandt, QA contractor, starting 2026-06-22 to cover Ravi's leave.
U: Budget check: we've spent 780,000 NOK so far, mostly on the scanners and Jonas's overtime.
A: Saved: 780,000 NOK of 1.2 million spent by end of May.
U: Mei thinks the offline mode needs two more sprints. If she's right we can't make August.
A: Shall I draft a note to Henrik with the offline mode risk?
""",
    "2026-06-11 12:20": """
U: Decision made at the steering meeting today: go-live moves again, now 2026-09-14.
A: Updated: Lantern go-live is now 2026-09-14, moved from 2026-08-17 for the offline mode work.
U: Henrik was fine with it as long as Drammen follows within six weeks of go-live.
A: Saved: Drammen is the second site, to follow within six weeks of the Gardermoen go-live.
U: The parallel run idea is approved, two weeks before cutover.
A: Good. So the parallel run would start around 2026-08-31.
U: Also, remind me I owe Mei a proper thank-you, she caught the pounds bug early.
A: Saved a reminder to thank Mei for catching the pallet weight units problem.
""",
}

QUERIES = [
    ("single-hop", "Which warehouse is the Lantern pilot site?", [("Gardermoen", "2026-01-19|Gardermoen warehouse as the pilot || pilot at Gardermoen", "MEM|Pilot warehouse")], []),
    ("single-hop", "What is the budget for Project Lantern?", [("1.2 million NOK", "2026-01-19", "MEM")], []),
    ("single-hop", "Who sponsors Project Lantern?", [("Henrik Aas", "2026-01-19", "MEM|Sponsor")], []),
    ("single-hop", "How much does a Zebrix TC-58 cost?", [("6,900 NOK", "2026-02-23")], []),
    ("single-hop", "How many scanners were ordered for Gardermoen?", [("Sixty || 60 Zebrix", "2026-02-23")], []),
    ("single-hop", "Who is the QA contractor covering Ravi's leave?", [("Elsa Brandt", "2026-05-28", "MEM")], []),
    ("single-hop", "When does Elsa Brandt start?", [("2026-06-22", "2026-05-28")], []),
    ("single-hop", "How much of the Lantern budget had been spent by end of May?", [("780,000 NOK", "2026-05-28", "MEM")], []),
    ("single-hop", "Who works on the frontend of Lantern?", [("Mei on frontend", "2026-01-19")], []),
    ("single-hop", "Which site follows after the Gardermoen go-live?", [("Drammen", "2026-06-11", "MEM")], []),
    ("single-hop", "What did Jonas propose for the cutover?", [("side by side for two weeks", "2026-03-30")], []),
    ("single-hop", "What units does the old app store pallet weights in?", [("pounds", "2026-02-23|Mei found the old app")], []),
    ("paraphrase", "Why did Ingrid's team pay extra for the more expensive handheld device?", [("freezer", "2026-02-23|survives the freezer || freezer rating")], []),
    ("paraphrase", "Who on Ingrid's team is going away to look after a newborn?", [("parental leave", "2026-05-28|Ravi told me", "MEM")], []),
    ("paraphrase", "What caused the first slip of Ingrid's launch?", [("API isn't ready || API delay", "2026-03-30")], []),
    ("paraphrase", "What capability does Ingrid's UI developer believe requires more development time?", [("offline mode", "2026-05-28|Mei thinks")], []),
    ("paraphrase", "Who deserves Ingrid's appreciation for spotting the measurement mix-up?", [("thank", "2026-06-11")], []),
    ("paraphrase", "What condition did the executive attach to the latest delay of Ingrid's rollout?", [("within six weeks", "2026-06-11|Henrik was fine")], []),
    ("paraphrase", "Where has most of Ingrid's project money gone?", [("mostly on the scanners", "2026-05-28")], []),
    ("paraphrase", "Can the pricier handheld Ingrid picked cope with sub-zero storage?", [("survives the freezer section", "2026-02-23")], []),
    ("temporal", "When is Lantern going live?", [("2026-09-14", "2026-06-11", "MEM")],
     ["2026-01-19|Go-live is planned for 2026-06-01 || go-live 2026-06-01", "2026-03-30|move go-live to 2026-08-17 || moved from 2026-06-01 to 2026-08-17"]),
    ("temporal", "When is Ingrid's steering meeting with Henrik?", [("Wednesdays at 13:00", "2026-03-30", "MEM")],
     ["2026-01-19|every Monday at 10:00 || Mondays at 10:00"]),
    ("temporal", "Who does QA on Lantern from July?", [("Elsa Brandt", "2026-05-28", "MEM")], ["2026-01-19|Ravi doing QA"]),
    ("multi-hop", "How many times has Lantern's go-live slipped, and why each time?",
     [("API isn't ready", "2026-03-30"), ("offline mode work", "2026-06-11")], []),
    ("multi-hop", "When does the parallel run start and who suggested it?",
     [("2026-08-31", "2026-06-11"), ("Jonas suggested", "2026-03-30")], []),
    ("multi-hop", "What share of Lantern's budget was used up by the end of May?",
     [("780,000 NOK", "2026-05-28|we've spent"), ("1.2 million NOK", "2026-01-19|Budget is 1.2 million")], []),
    ("multi-hop", "Who replaces the QA engineer and what experience does she bring?",
     [("Ravi doing QA", "2026-01-19"), ("QA for a logistics app", "2026-05-28")], []),
    ("negative", "Which cloud provider hosts Lantern?", [], []),
    ("negative", "What did Ingrid's team do for the summer party?", [], []),
    ("negative", "How much do the Zebrix batteries cost to replace?", [], []),
]
