KEY, NAME, FIRST = "leila", "Leila Haddad", "Leila"
NOW = "2026-06-30"

MEMORY = [
    "Leila Haddad, graphic designer in Lyon; lives with her brother Karim; has an allotment plot (no. 17) at Jardins de la Croix-Rousse.",
    "Puppy: Pistache, a cocker spaniel born 2026-01-10, came home 2026-03-14.",
    "Vet: Dr. Morel at Clinique Vétérinaire des Pentes; Pistache is on Bravecto for fleas and ticks.",
    "Puppy class: Saturdays at 10:00 at Éducanin (moved from Sundays at 11:00 in May 2026).",
    "Pistache's food: Orijen Puppy (switched from Royal Canin in April because of loose stools).",
    "Allotment crops 2026: tomatoes (Cœur de Bœuf), courgettes, broad beans, and a row of dahlias.",
]

SESSIONS = {
    "2026-03-14 18:00": """
U: We brought our puppy home today! A cocker spaniel, we called her Pistache. She was born on 2026-01-10.
A: Congratulations! Pistache is a lovely name. How is she settling in?
U: She cried a bit in the crate but she's asleep now on Karim's jumper.
A: A jumper that smells of you helps a lot. Do you have a vet lined up?
U: Dr. Morel at Clinique Vétérinaire des Pentes, first visit is on 2026-03-20.
A: Saved: vet Dr. Morel at Clinique Vétérinaire des Pentes, first visit 2026-03-20.
U: The breeder fed her Royal Canin puppy food, we'll keep it for now.
A: Noted: Royal Canin puppy food, as from the breeder.
""",
    "2026-03-20 17:30": """
U: Vet visit done. She weighs 3.4 kilos and had her second vaccination.
A: Saved: Pistache 3.4 kg on 2026-03-20, second vaccination done.
U: Dr. Morel recommended Bravecto for fleas and ticks, a chew every twelve weeks.
A: Saved: Bravecto chew every twelve weeks. I'll remind you when the next one is due.
U: She also said no long walks until she's six months old, five minutes per month of age.
A: Noted the walking rule: about five minutes per month of age until six months.
U: And we signed up for puppy class at Éducanin, Sundays at 11.
A: Saved: puppy class at Éducanin, Sundays at 11:00.
""",
    "2026-04-16 09:15": """
U: Pistache has had loose stools for a week. Vet thinks the food doesn't suit her.
A: Poor thing. What did the vet suggest?
U: Switch to Orijen Puppy, mixing it in gradually over a week.
A: Updated: switching from Royal Canin to Orijen Puppy, gradual change over one week.
U: Separate thing, I got an allotment plot at Jardins de la Croix-Rousse! Plot number 17.
A: Lovely. Saved: allotment plot 17 at Jardins de la Croix-Rousse. What will you grow?
U: Tomatoes, Cœur de Bœuf, plus courgettes and broad beans.
A: Saved your crops: Cœur de Bœuf tomatoes, courgettes and broad beans.
""",
    "2026-05-22 20:00": """
U: Puppy class moved to Saturdays at 10, the trainer couldn't do Sundays anymore.
A: Updated: puppy class now Saturdays at 10:00 at Éducanin.
U: Pistache learned to sit and wait at the door, the trainer was impressed.
A: Well done Pistache. Sit-and-wait at doors is very useful for safety.
U: The broad beans are covered in black aphids, what do I do?
A: Pinch out the tips where the aphids gather and spray with soapy water. Ladybirds will help too.
U: I also planted a row of dahlias for Karim, they're his favourite.
A: Saved: a row of dahlias at the allotment for Karim.
""",
    "2026-06-29 19:10": """
U: Pistache is nearly six months and weighs 9.8 kilos now. Her stomach is fine on the Orijen.
A: Great growth. Saved: 9.8 kg in late June, digestion fine on Orijen Puppy.
U: First tomatoes are ripening! And the courgettes are out of control.
A: Classic courgette summer. Maybe try courgette fritters or give some to the neighbours.
U: Next Bravecto is due, can you check when?
A: The first chew was around 2026-03-20 and they're every twelve weeks, so the next one was due about 2026-06-12. You're a little late, give it this week.
""",
}

QUERIES = [
    ("single-hop", "What breed is Pistache?", [("cocker spaniel", "2026-03-14", "MEM")], []),
    ("single-hop", "When was Pistache born?", [("2026-01-10", "2026-03-14", "MEM")], []),
    ("single-hop", "Who is Pistache's vet?", [("Dr. Morel", "2026-03-14", "MEM")], []),
    ("single-hop", "How much did Pistache weigh at her first vet visit?", [("3.4 kilos || 3.4 kg", "2026-03-20")], []),
    ("single-hop", "How often does Pistache get a Bravecto chew?", [("every twelve weeks", "2026-03-20", "2026-06-29")], []),
    ("single-hop", "What number is Leila's allotment plot?", [("17", "2026-04-16|Plot number 17 || plot 17", "MEM|allotment plot")], []),
    ("single-hop", "Which tomato variety is Leila growing?", [("Cœur de Bœuf", "2026-04-16", "MEM")], []),
    ("single-hop", "Where is the puppy class held?", [("Éducanin", "2026-03-20|signed up for puppy class || Saved: puppy class", "MEM")], []),
    ("single-hop", "What trick did Pistache learn at puppy class?", [("sit and wait", "2026-05-22")], []),
    ("single-hop", "Who are the dahlias for?", [("dahlias for Karim || for Karim", "2026-05-22")], []),
    ("single-hop", "Who does Leila live with?", [("brother Karim", "MEM")], []),
    ("single-hop", "Where did Pistache sleep on her first night?", [("Karim's jumper", "2026-03-14")], []),
    ("paraphrase", "What tummy trouble did Leila's young dog have in April?", [("loose stools", "2026-04-16|Pistache has had")], []),
    ("paraphrase", "How much exercise outdoors may Leila's little one get?", [("five minutes per month", "2026-03-20")], []),
    ("paraphrase", "Which pests are attacking Leila's legumes?", [("black aphids", "2026-05-22")], []),
    ("paraphrase", "Which beetles could deal with the bugs on Leila's beans?", [("Ladybirds", "2026-05-22")], []),
    ("paraphrase", "What can Leila do with the glut of green squash?", [("fritters", "2026-06-29")], []),
    ("paraphrase", "Why did the training sessions for Leila's dog change day?", [("trainer couldn't do Sundays", "2026-05-22")], []),
    ("paraphrase", "How did Leila's animal react to the travel box on day one?", [("cried a bit in the crate", "2026-03-14")], []),
    ("paraphrase", "Is the parasite treatment for Leila's dog overdue?", [("a little late", "2026-06-29")], []),
    ("temporal", "When is Pistache's puppy class?", [("Saturdays at 10", "2026-05-22", "MEM")],
     ["2026-03-20|Sundays at 11"]),
    ("temporal", "What food does Pistache eat?", [("Orijen", "2026-04-16|Switch to Orijen || switching from Royal Canin", "2026-06-29|fine on the Orijen || fine on Orijen", "MEM")],
     ["2026-03-14|Royal Canin"]),
    ("temporal", "How much does Pistache weigh?", [("9.8", "2026-06-29")], ["2026-03-20|3.4"]),
    ("multi-hop", "How old was Pistache when she weighed 3.4 kilos?",
     [("2026-01-10", "2026-03-14|She was born"), ("3.4", "2026-03-20")], [], "born 01-10, 3.4 kg on 03-20: about ten weeks"),
    ("multi-hop", "How much weight did Pistache gain between her first vet visit and late June?",
     [("3.4", "2026-03-20|She weighs 3.4"), ("9.8", "2026-06-29|weighs 9.8")], []),
    ("multi-hop", "Which vegetables are at the allotment and which one has aphids?",
     [("courgettes and broad beans", "2026-04-16"), ("black aphids", "2026-05-22")], []),
    ("multi-hop", "Who recommended the flea treatment, and when was the next dose due?",
     [("Dr. Morel recommended Bravecto", "2026-03-20"), ("2026-06-12", "2026-06-29")], []),
    ("negative", "What is the name of Leila's cat?", [], []),
    ("negative", "Which dog show did Pistache enter?", [], []),
    ("negative", "How many strawberries did the allotment produce?", [], []),
]
