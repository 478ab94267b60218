KEY, NAME, FIRST = "aiko", "Aiko Tanaka", "Aiko"
NOW = "2026-10-05"

MEMORY = [
    "Aiko Tanaka, retired pharmacist in Vancouver; hobbies are wheel-thrown pottery and birdwatching.",
    "Pottery studio: Clayworks Co-op on Main Street; her membership includes two kiln shelves a month.",
    "Favourite clay: Laguna B-Mix cone 5 (switched from Speckled Buff in August 2026).",
    "Glaze she is developing: a celadon she calls Rain Pond; best result from the 2026-09-20 firing.",
    "Bird list 2026: 142 species by early October; target 150 by year end.",
    "Birding partner: her neighbour Gordon, who drives to Boundary Bay on Sunday mornings.",
    "Wrist tendinitis in the right hand; limits throwing sessions to 90 minutes.",
]

SESSIONS = {
    "2026-05-03 10:10": """
U: I've retired from the pharmacy at last and I finally have time for pottery. I joined Clayworks Co-op on Main Street.
A: Congratulations on retiring! What does the membership include?
U: Unlimited wheel time and two kiln shelves a month. I'm using a clay called Speckled Buff for now.
A: Saved: Clayworks Co-op on Main Street, two kiln shelves a month, Speckled Buff clay.
U: I also keep a bird list. I'm at 96 species for the year and I'd love to reach 150.
A: Saved your 2026 bird list: 96 species so far, target 150.
U: My neighbour Gordon drives us to Boundary Bay on Sunday mornings for the shorebirds.
A: Noted: Sunday mornings at Boundary Bay with Gordon.
""",
    "2026-06-21 15:30": """
U: My right wrist has been aching after long sessions at the wheel. The physio says it's tendinitis.
A: Sorry to hear that. What did the physio recommend?
U: Keep throwing sessions under ninety minutes, wear a brace at night, and do wrist stretches.
A: Saved: tendinitis in the right wrist, sessions capped at 90 minutes, night brace, stretches.
U: Good news though, we saw a snowy owl at Boundary Bay! Very unusual in June, it must be lost.
A: What a sighting. I'll add the snowy owl to your list, that makes 118 species.
U: And I'm trying to make a pale green celadon glaze, I'm calling it Rain Pond.
A: A lovely name. Celadons need a reduction firing usually; does the co-op kiln do that?
U: They have a gas kiln for reduction once a month.
A: Good, then Rain Pond tests can go in the monthly gas firing.
""",
    "2026-08-14 11:45": """
U: I gave up on Speckled Buff, the iron spots bleed through the celadon. Switched to Laguna B-Mix, it's a smooth white cone 5 clay.
A: Updated your clay: Laguna B-Mix cone 5 instead of Speckled Buff, because the iron speckles showed through the glaze.
U: The first Rain Pond test came out too blue and crawled at the rim.
A: Crawling often comes from glaze applied too thick or a dusty surface. Try a thinner coat and wipe the bisque first.
U: Gordon and I saw a pair of black oystercatchers at Lighthouse Park, new for the year.
A: Added black oystercatcher; that brings the list to 131 species.
""",
    "2026-09-21 17:00": """
U: The Rain Pond glaze came out perfect in yesterday's firing! Soft green, no crawling, lovely crackle.
A: Wonderful! Saved: best Rain Pond result in the 2026-09-20 firing. What did you change?
U: Thinner application, two dips instead of three, and a little less iron oxide, 1.5 percent instead of 2.
A: Saved the recipe change: iron oxide 1.5 percent and two dips.
U: I'm going to sell a few bowls at the co-op's holiday market on 2026-12-05.
A: Saved: Clayworks holiday market on 2026-12-05. How many pieces are you aiming for?
U: Maybe twenty bowls and some mugs.
A: Twenty bowls plus mugs it is. Pace yourself with the wrist.
""",
    "2026-10-04 09:20": """
U: Bird list update, we hit 142 with a Townsend's solitaire at Cypress Mountain.
A: Great find. Saved: 142 species, the Townsend's solitaire at Cypress Mountain.
U: Eight to go for 150, and there's still three months.
A: Winter ducks and owls could get you there. Gordon might want to try Reifel Sanctuary.
U: Also the wrist is better, I can do the full ninety minutes without pain now.
A: Good to hear the tendinitis is settling. Keep the stretches going.
""",
}

QUERIES = [
    ("single-hop", "Which pottery studio did Aiko join?", [("Clayworks Co-op", "2026-05-03|I joined Clayworks || Saved: Clayworks", "MEM")], []),
    ("single-hop", "How many kiln shelves does Aiko's membership include?", [("two kiln shelves", "2026-05-03", "MEM")], []),
    ("single-hop", "Where does Gordon take Aiko on Sunday mornings?", [("Boundary Bay", "2026-05-03", "MEM")], []),
    ("single-hop", "What did Aiko name her celadon glaze?", [("Rain Pond", "2026-06-21|calling it Rain Pond", "MEM")], []),
    ("single-hop", "What rare bird did Aiko see at Boundary Bay in June?", [("snowy owl", "2026-06-21")], []),
    ("single-hop", "How often does the co-op run the gas reduction kiln?", [("once a month", "2026-06-21")], []),
    ("single-hop", "Where did Aiko see the black oystercatchers?", [("Lighthouse Park", "2026-08-14")], []),
    ("single-hop", "How much iron oxide is in the final Rain Pond recipe?", [("1.5 percent", "2026-09-21")], []),
    ("single-hop", "When is the Clayworks holiday market?", [("2026-12-05", "2026-09-21")], []),
    ("single-hop", "How many bowls does Aiko plan to sell at the market?", [("twenty bowls", "2026-09-21")], []),
    ("single-hop", "Where did Aiko see the Townsend's solitaire?", [("Cypress Mountain", "2026-10-04")], []),
    ("single-hop", "What did Aiko do before retiring?", [("pharmac", "2026-05-03|retired from the pharmacy", "MEM")], []),
    ("paraphrase", "What's wrong with Aiko's hand?", [("tendinitis", "2026-06-21|The physio says", "MEM")], []),
    ("paraphrase", "How long can Aiko sit at the potter's wheel each time?", [("ninety minutes || 90 minutes", "2026-06-21|Keep throwing || capped", "MEM|limits throwing")], []),
    ("paraphrase", "Why did Aiko's initial green finish go wrong?", [("too blue and crawled", "2026-08-14")], []),
    ("paraphrase", "What went wrong with Aiko's spotty earthenware under the pale finish?", [("iron spots bleed", "2026-08-14")], []),
    ("paraphrase", "How did Aiko fix the finish peeling back at the lip?", [("Thinner application", "2026-09-21")], []),
    ("paraphrase", "What does Aiko put on for bed to protect her joint?", [("brace at night", "2026-06-21")], []),
    ("paraphrase", "Which reserve did the assistant suggest to Aiko for cold-season waterfowl?", [("Reifel Sanctuary", "2026-10-04")], []),
    ("paraphrase", "How far is Aiko from her yearly sightings goal?", [("Eight to go", "2026-10-04")], []),
    ("temporal", "How many bird species has Aiko seen this year?", [("142", "2026-10-04", "MEM")],
     ["2026-05-03|96 species", "2026-06-21|118 species", "2026-08-14|131 species"]),
    ("temporal", "What clay does Aiko use?", [("B-Mix", "2026-08-14", "MEM")], ["2026-05-03|Speckled Buff"]),
    ("temporal", "Does Aiko's wrist still hurt after a full session?", [("without pain", "2026-10-04")],
     ["2026-06-21|wrist has been aching"]),
    ("multi-hop", "How many species did Aiko add to her list between May and October?",
     [("96 species", "2026-05-03"), ("142", "2026-10-04|we hit 142")], []),
    ("multi-hop", "Which firing gave the best Rain Pond result, and in what kind of kiln would it have been fired?",
     [("2026-09-20", "2026-09-21"), ("gas kiln for reduction", "2026-06-21")], []),
    ("multi-hop", "What two changes fixed the Rain Pond glaze, and what was wrong before?",
     [("two dips instead of three", "2026-09-21"), ("crawled at the rim", "2026-08-14")], []),
    ("multi-hop", "Who is Aiko's birding partner and where did they see the oystercatchers?",
     [("Gordon", "2026-05-03|My neighbour Gordon"), ("Lighthouse Park", "2026-08-14")], []),
    ("negative", "What kind of camera lens does Aiko use for bird photos?", [], []),
    ("negative", "Which pottery classes does Aiko teach?", [], []),
    ("negative", "What did Aiko's daughter give her for her retirement?", [], []),
]
