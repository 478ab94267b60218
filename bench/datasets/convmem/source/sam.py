KEY, NAME, FIRST = "sam", "Sam Whitaker", "Sam"
NOW = "2026-09-02"

MEMORY = [
    "Sam Whitaker, 29, product designer in Dublin; learning European Portuguese before moving to Porto in 2027.",
    "Portuguese tutor: Beatriz, on Zoom, Tuesdays and Fridays at 19:00 (Fridays replaced Thursdays in June 2026).",
    "Goal: CAPLE exam at level B1 (DEPLE), sitting on 2026-11-21 at the Instituto Camões centre in Dublin.",
    "Uses Anki with a deck of about 1,800 cards; 20 new cards a day.",
    "Cycling: commutes by bike; training for the Ring of Kerry charity cycle (signed up for 2027).",
    "Partner: Noah, who already speaks Portuguese from his Brazilian mother.",
]

SESSIONS = {
    "2026-03-03 21:30": """
U: I want to get properly good at Portuguese, European not Brazilian, because Noah and I plan to move to Porto next year.
A: Exciting plan. Where are you starting from?
U: I did Duolingo for a year but I can barely hold a conversation. Noah speaks Portuguese from his Brazilian mum but he's not a patient teacher.
A: Then a tutor would help. Do you want regular lessons?
U: I found one, Beatriz, she's from Braga and teaches on Zoom. Tuesdays and Thursdays at seven in the evening.
A: Saved: tutor Beatriz from Braga, Zoom lessons Tuesdays and Thursdays at 19:00.
U: She charges 28 euros an hour.
A: Noted: 28 euros per lesson.
""",
    "2026-04-18 12:10": """
U: Beatriz thinks I should aim for an official exam, the CAPLE A2 in November.
A: A fixed exam date is great motivation. Do you know where you'd sit it in Dublin?
U: The Instituto Camões centre runs it. The A2 exam is called ACESSO.
A: Saved: CAPLE A2 (ACESSO) in November at the Instituto Camões centre in Dublin.
U: I've started an Anki deck too, 15 new cards a day.
A: Noted: Anki, 15 new cards per day. Consistency matters more than volume.
U: I keep mixing up ser and estar, it's so annoying.
A: Very common. A quick rule of thumb: ser for what something is, estar for how or where it is right now.
""",
    "2026-06-09 19:45": """
U: Beatriz can't do Thursdays anymore, so we moved that lesson to Fridays, same time.
A: Updated: lessons now Tuesdays and Fridays at 19:00.
U: She also says I'm progressing faster than expected and should go for B1 instead of A2.
A: That's a big vote of confidence. The B1 exam is called DEPLE. Do you want to switch?
U: Yes, let's go for B1. The exam is on 2026-11-21.
A: Updated: aiming for CAPLE B1 (DEPLE) on 2026-11-21 instead of A2.
U: I've upped Anki to 20 new cards a day. The deck is at about 1,200 cards.
A: Saved: Anki now 20 new cards per day, deck around 1,200 cards.
""",
    "2026-07-25 08:00": """
U: Not Portuguese today, bike stuff. My commuter got stolen outside the office on Thursday.
A: I'm sorry. Did you report it to the Gardaí and your insurer?
U: Yes, reported it, crime number IE-7734-22. Insurance will pay 650 euros.
A: Saved: stolen bike, report IE-7734-22, insurer paying 650 euros.
U: I'm thinking of buying a steel touring bike, a Genesis Croix de Fer, because I want to do the Ring of Kerry cycle next year.
A: Saved: considering a Genesis Croix de Fer, with the Ring of Kerry charity cycle as a 2027 goal.
U: Also need a better lock. The old one was a cheap cable lock.
A: A D-lock rated Sold Secure Gold is worth it in Dublin.
""",
    "2026-09-01 20:15": """
U: Bought the Croix de Fer and a Kryptonite D-lock. Signed up for the Ring of Kerry 2027 too.
A: Great. Saved: new Genesis Croix de Fer, Kryptonite D-lock, registered for the Ring of Kerry 2027.
U: Portuguese update, Beatriz gave me a mock B1 writing test and I scored 71 out of 100.
A: Good score. Was there a weak area?
U: Prepositions, a, em, para, por. I lost most points there.
A: Prepositions are tough. I'll keep a list of your mistakes for review.
U: And my Anki deck passed 1,800 cards.
A: Saved: Anki deck now about 1,800 cards.
""",
}

QUERIES = [
    ("single-hop", "Who is Sam's Portuguese tutor?", [("Beatriz", "2026-03-03|I found one, Beatriz || tutor Beatriz", "MEM")], []),
    ("single-hop", "Where is Beatriz from?", [("Braga", "2026-03-03")], []),
    ("single-hop", "How much does Sam pay per Portuguese lesson?", [("28 euros", "2026-03-03")], []),
    ("single-hop", "Where will Sam sit the Portuguese exam?", [("Instituto Camões", "2026-04-18", "MEM")], []),
    ("single-hop", "What is the name of the B1 Portuguese exam?", [("DEPLE", "2026-06-09", "MEM")], []),
    ("single-hop", "When is Sam's Portuguese exam?", [("2026-11-21", "2026-06-09", "MEM")], []),
    ("single-hop", "What is the crime number for Sam's stolen bike?", [("IE-7734-22", "2026-07-25")], []),
    ("single-hop", "How much will insurance pay for the stolen bike?", [("650 euros", "2026-07-25")], []),
    ("single-hop", "What did Sam score on the mock writing test?", [("71 out of 100", "2026-09-01")], []),
    ("single-hop", "Which city are Sam and Noah moving to?", [("Porto", "2026-03-03", "MEM")], []),
    ("single-hop", "What lock did Sam buy?", [("Kryptonite D-lock", "2026-09-01")], []),
    ("single-hop", "Which charity cycle did Sam sign up for?", [("Ring of Kerry", "2026-09-01", "MEM")], []),
    ("paraphrase", "Which grammar words cost Sam most marks in the practice paper?", [("Prepositions", "2026-09-01|Prepositions, a, em")], []),
    ("paraphrase", "Why isn't Sam's boyfriend the one teaching her?", [("not a patient teacher", "2026-03-03")], []),
    ("paraphrase", "Which two verbs for 'to be' confuse Sam?", [("ser and estar", "2026-04-18")], []),
    ("paraphrase", "What happened to the two-wheeler Sam rode to work?", [("stolen", "2026-07-25|My commuter got stolen")], []),
    ("paraphrase", "What flimsy security device did Sam use before?", [("cheap cable lock", "2026-07-25")], []),
    ("paraphrase", "Which phone app did Sam use before hiring a tutor?", [("Duolingo", "2026-03-03")], []),
    ("paraphrase", "Why did Sam's teacher suggest a harder certificate?", [("progressing faster than expected", "2026-06-09")], []),
    ("paraphrase", "What certification should a sturdy bicycle security device carry, according to the advice Sam got?", [("Sold Secure Gold", "2026-07-25")], []),
    ("temporal", "When are Sam's Portuguese lessons?", [("Fridays", "2026-06-09|moved that lesson to Fridays || Tuesdays and Fridays", "MEM")],
     ["2026-03-03|Tuesdays and Thursdays at seven || Tuesdays and Thursdays at 19:00"]),
    ("temporal", "Which level of the Portuguese exam is Sam taking?", [("B1", "2026-06-09|let's go for B1 || aiming for CAPLE B1", "MEM")],
     ["2026-04-18|the CAPLE A2 in November || Saved: CAPLE A2"]),
    ("temporal", "How many cards are in Sam's Anki deck?", [("1,800", "2026-09-01", "MEM")], ["2026-06-09|deck is at about 1,200 || deck around 1,200"]),
    ("multi-hop", "What did the insurer pay Sam for the stolen bike, and what did Sam buy to replace it?",
     [("650 euros", "2026-07-25|Insurance will pay"), ("Bought the Croix de Fer", "2026-09-01")], []),
    ("multi-hop", "Which city is Sam moving to, and on what date is the exam Sam is preparing for?",
     [("Porto", "2026-03-03|move to Porto"), ("2026-11-21", "2026-06-09")], []),
    ("multi-hop", "How many new Anki cards a day did Sam add in April compared to June?",
     [("15 new cards", "2026-04-18"), ("20 new cards", "2026-06-09")], []),
    ("multi-hop", "Which bike did Sam choose to replace the stolen one, and for what event?",
     [("stolen outside the office", "2026-07-25"), ("Croix de Fer", "2026-09-01|Bought the Croix")], []),
    ("negative", "Which Spanish course is Sam taking?", [], []),
    ("negative", "What apartment did Sam rent in Porto?", [], []),
    ("negative", "What was Sam's finishing time in the Ring of Kerry?", [], [], "signed up for 2027, not ridden"),
]
