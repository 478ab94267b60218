KEY, NAME, FIRST = "marcus", "Marcus Bell", "Marcus"
NOW = "2026-05-30"

MEMORY = [
    "Marcus Bell, single dad in Bristol; children Ruby (11) and Theo (7); works shifts as a paramedic.",
    "Ruby's football training: Thursdays 17:30 at Ashton Park (moved from Tuesdays).",
    "Theo has swimming lessons on Saturday mornings at 09:00, Easton Leisure Centre.",
    "Marcus's mum, June, moved into Rosewood care home in Clifton in March 2026; visiting hours 10:00-19:00.",
    "Childminder on night shifts: Mrs Okonjo, 07700 900417.",
    "Ruby starts secondary school at Cotham School in September 2026.",
    "Theo is allergic to kiwi fruit.",
]

SESSIONS = {
    "2026-01-06 21:40": """
U: New year, new attempt at being organised. Can you help me track the kids' stuff? Ruby is 11, Theo is 7.
A: Of course. What are the regular activities each week?
U: Ruby has football training on Tuesdays at 17:30 at Ashton Park. Theo does swimming on Saturday mornings at 09:00 at Easton Leisure Centre.
A: Saved: Ruby football Tuesdays 17:30 Ashton Park; Theo swimming Saturdays 09:00 Easton Leisure Centre.
U: When I'm on night shifts, Mrs Okonjo next door has them. Her number is 07700 900417.
A: Saved Mrs Okonjo as the night-shift childminder with her number.
U: At the moment my rota is two night shifts a week, usually Wednesday and Thursday.
A: Noted: two night shifts a week, Wednesdays and Thursdays, so Mrs Okonjo covers those evenings.
U: Oh and Theo is allergic to kiwi, his lips swell up. School knows but birthday parties don't always.
A: Noted: Theo, kiwi allergy with lip swelling. I'll remind you to tell party hosts.
""",
    "2026-02-17 22:05": """
U: My mum June had another fall last week. The GP says she can't really live alone anymore.
A: I'm sorry, Marcus. That's a hard situation. Are you and she looking at care homes?
U: Yes, we visited Rosewood in Clifton and Elmfield in Redland. Mum liked Rosewood because of the garden.
A: A place she likes matters a lot. What did the fees look like?
U: Rosewood is 1,350 pounds a week, Elmfield 1,180. Mum's house sale would cover it for a few years.
A: Saved both options: Rosewood 1,350 per week, Elmfield 1,180 per week, funded from the house sale.
U: My sister Claire in Leeds is helping with the paperwork, she has power of attorney.
A: Noted: Claire in Leeds holds power of attorney and handles paperwork.
""",
    "2026-03-12 20:15": """
U: Mum moved into Rosewood yesterday. She cried a bit but the staff were really kind.
A: That's a big day. It's good the staff made her welcome.
U: Visiting hours are ten in the morning to seven in the evening. I'll go on my days off.
A: Saved Rosewood visiting hours 10:00-19:00.
U: Also Ruby's football moved to Thursdays, same time, because the pitch is being resurfaced.
A: Updated: Ruby's football is now Thursdays at 17:30 at Ashton Park.
U: Ruby wants to bring Mum a drawing of the cat every visit, it's sweet.
A: That will mean a lot to her. Small rituals help people settle into care homes.
""",
    "2026-04-20 19:30": """
U: Ruby got her secondary school place, Cotham School, her first choice!
A: Brilliant news. Saved: Ruby starts at Cotham School in September 2026.
U: Theo moved up to the Stage 4 swimming group, he can do 25 metres of front crawl now.
A: Well done Theo. Does the time change with the new group?
U: No, still Saturday at nine.
A: Good, the swimming slot stays Saturdays at 09:00.
U: My rota changes in May, I'll be on four nights in a row every other week.
A: I'll note that so we can line up Mrs Okonjo early for the night blocks.
""",
    "2026-05-29 18:00": """
U: Half term is coming up and I forgot to book anything. Ruby wants a football camp.
A: There are usually holiday camps at Ashton Park. Do you want me to list options?
U: Found one, Bristol City holiday camp, 2026-06-01 to 2026-06-03, 95 pounds for the three days.
A: Saved: Ruby at the Bristol City holiday camp 2026-06-01 to 2026-06-03, 95 pounds.
U: Theo will come with me to see Mum at Rosewood on the Tuesday, they're doing a garden party.
A: Lovely. I'll note the Rosewood garden party on 2026-06-02 with Theo.
U: Remind me to pack Theo a snack without kiwi, they always have fruit salad there.
A: Will do: kiwi-free snack for Theo for the garden party.
""",
}

QUERIES = [
    ("single-hop", "When does Theo have swimming?", [("Saturday", "2026-01-06|Theo does swimming || Theo swimming Saturdays", "MEM", "2026-04-20|still Saturday at nine || Saturdays at 09:00")], []),
    ("single-hop", "What is Mrs Okonjo's phone number?", [("07700 900417", "2026-01-06", "MEM")], []),
    ("single-hop", "What is Theo allergic to?", [("kiwi", "2026-01-06|allergic to kiwi || kiwi allergy", "MEM")], []),
    ("single-hop", "Which care home did Marcus's mum move into?", [("Rosewood", "2026-03-12|Mum moved into Rosewood", "MEM|moved into Rosewood")], []),
    ("single-hop", "How much does Elmfield cost per week?", [("1,180", "2026-02-17")], []),
    ("single-hop", "Who has power of attorney for Marcus's mum?", [("power of attorney", "2026-02-17")], []),
    ("single-hop", "Which secondary school is Ruby going to?", [("Cotham School", "2026-04-20", "MEM")], []),
    ("single-hop", "What swimming group is Theo in now?", [("Stage 4", "2026-04-20")], []),
    ("single-hop", "How much is Ruby's half-term football camp?", [("95 pounds", "2026-05-29")], []),
    ("single-hop", "What are the visiting hours at Rosewood?", [("10:00-19:00 || ten in the morning to seven", "2026-03-12", "MEM")], []),
    ("single-hop", "What is Marcus's job?", [("paramedic", "MEM")], []),
    ("single-hop", "When is the Rosewood garden party?", [("2026-06-02", "2026-05-29")], []),
    ("paraphrase", "Who looks after Marcus's children when he works overnight?", [("Mrs Okonjo", "2026-01-06", "MEM")], []),
    ("paraphrase", "What happens to the mouth of Marcus's boy if he eats the fuzzy green fruit?", [("lips swell", "2026-01-06")], []),
    ("paraphrase", "Why was Marcus's mother no longer safe on her own?", [("another fall", "2026-02-17")], []),
    ("paraphrase", "What made Marcus's elderly mother prefer one residence over the other?", [("garden", "2026-02-17|Mum liked Rosewood")], []),
    ("paraphrase", "Why did the sport practice of Marcus's girl change day?", [("resurfaced", "2026-03-12")], []),
    ("paraphrase", "What does Marcus's girl make for her grandmother whenever they go?", [("drawing of the cat", "2026-03-12")], []),
    ("paraphrase", "How far can Marcus's youngest go in the pool now?", [("25 metres", "2026-04-20")], []),
    ("paraphrase", "How will the fees for the new home of Marcus's mother be paid?", [("house sale", "2026-02-17")], []),
    ("temporal", "What day is Ruby's football training?", [("Thursdays", "2026-03-12|Ruby's football moved || Ruby's football is now", "MEM|football")],
     ["2026-01-06|Ruby has football training on Tuesdays || Ruby football Tuesdays"]),
    ("temporal", "Where does Marcus's mother live now?", [("Rosewood", "2026-03-12|Mum moved into Rosewood", "MEM|moved into Rosewood")],
     ["2026-02-17|can't really live alone"]),
    ("temporal", "What is Marcus's shift pattern from May?", [("four nights in a row", "2026-04-20")], ["2026-01-06|my rota is two night shifts || two night shifts a week"]),
    ("multi-hop", "How much more per week is the care home Marcus's mum chose than the other one?",
     [("Rosewood", "2026-03-12|Mum moved into Rosewood"), ("1,350 pounds a week", "2026-02-17")], []),
    ("multi-hop", "What must Marcus remember about food at the care home garden party?",
     [("fruit salad", "2026-05-29"), ("lips swell", "2026-01-06")], []),
    ("multi-hop", "Where is Ruby's half-term camp and where does she usually train?",
     [("Bristol City holiday camp", "2026-05-29|Found one"), ("Ashton Park", "2026-03-12|Ruby's football is now")], []),
    ("multi-hop", "Who holds power of attorney for Marcus's mum, and which care home did the family pick?",
     [("power of attorney", "2026-02-17|My sister Claire"), ("Rosewood", "2026-03-12|Mum moved into Rosewood")], []),
    ("negative", "What is the name of Marcus's wife?", [], []),
    ("negative", "Which piano teacher does Ruby have?", [], []),
    ("negative", "What breed is Marcus's family dog?", [], []),
]
