KEY, NAME, FIRST = "priya", "Priya Raman", "Priya"
NOW = "2026-06-20"

MEMORY = [
    "Priya Raman, 34, secondary-school chemistry teacher in Leeds; lives with her partner Callum and a tabby cat called Marmite.",
    "Migraine with aura since her teens; neurologist is Dr. Adeyemi at Leeds General Infirmary.",
    "Current migraine preventive: candesartan 8 mg once a day (started 2026-05-14). Propranolol was stopped because of cold hands and tiredness.",
    "Known triggers: skipped meals, red wine, and bright fluorescent lab lighting.",
    "Allergic to penicillin (rash as a child); fine with clarithromycin.",
    "Running: training for the Leeds Abbey Dash 10K on 2026-11-08; runs with the Hyde Park Harriers on Tuesday evenings.",
    "Keeps a headache diary in the Migraine Buddy app and exports it before each clinic visit.",
    "Wants replies short and practical; no medical jargon without an explanation.",
]

SESSIONS = {
    "2026-01-11 20:10": """
U: Can you help me keep track of my migraines this year? I've had three attacks in the last fortnight and I want to go to the GP with proper notes.
A: Of course. For each attack it helps to note the date, how long it lasted, what you took, and anything unusual that day such as sleep, food or stress.
U: The worst one was last Thursday, it started with zigzag lights in my left eye for about twenty minutes and then a pounding headache that lasted until the next afternoon.
A: That sounds like a migraine with aura. I'll log it as a 2026-01-08 attack, aura around twenty minutes, headache roughly a day.
U: I've had migraines with aura since I was fifteen, but they were never this frequent.
A: Noted. Did anything stand out before the attacks, like missed meals or late nights?
U: Two of them came on days when I skipped lunch because of marking, and one after a glass of red wine at my sister's birthday.
A: Skipped meals and red wine are both common triggers. I'll keep them on your trigger list so we can watch for patterns.
U: Also I'm allergic to penicillin, I got a rash as a kid, so if the GP mentions antibiotics for anything remind me.
A: Saved: penicillin allergy, childhood rash. I'll flag it whenever medicines come up.
""",
    "2026-01-27 17:45": """
U: Saw the GP today, Dr. Whitfield. She wants me to try propranolol as a preventive, 40 mg twice a day.
A: Got it: propranolol 40 mg twice daily, prescribed 2026-01-27. Did she say how long before you'd know if it works?
U: About eight weeks. She also referred me to a neurologist at Leeds General Infirmary, but the waiting list is long.
A: I'll note the referral. Would you like a reminder to review the diary in late March?
U: Yes please. And she said sumatriptan 50 mg is fine for the attacks themselves, no more than twice in 24 hours.
A: Saved: sumatriptan 50 mg as the rescue medicine, maximum two doses in 24 hours.
U: I'm going to use the Migraine Buddy app for the diary, it makes a nice PDF export.
A: Good choice. Export it before each appointment so the doctor can see the pattern at a glance.
U: One more thing, the fluorescent tubes in my lab at school seem to make things worse.
A: I'll add bright fluorescent lighting to the trigger list alongside skipped meals and red wine.
""",
    "2026-03-19 21:05": """
U: Eight weeks on propranolol now. Fewer attacks, maybe four this month instead of seven, but my hands are always freezing.
A: That is a real improvement in frequency. Cold hands are a known side effect of beta blockers; worth mentioning to the GP.
U: I went back and Dr. Whitfield put the dose up to 80 mg twice a day because it's working but not enough.
A: Updated: propranolol 80 mg twice daily from 2026-03-19.
U: The neurology letter came too. First appointment is on 2026-04-22 with Dr. Adeyemi.
A: Saved the neurology appointment: 2026-04-22, Dr. Adeyemi. I'll remind you to export the diary the day before.
U: On a happier note I've started running again, Callum talked me into the couch to 5K plan.
A: Nice. Regular moderate exercise helps some people with migraine. Which week of the plan are you on?
U: Week three. We go round Hyde Park three mornings a week before school.
A: Logged: couch to 5K, week three, three mornings a week in Hyde Park.
""",
    "2026-04-22 18:30": """
U: Neurology appointment done. Dr. Adeyemi was lovely but she thinks the propranolol is why I'm so tired.
A: Tiredness is another common side effect. What did she suggest instead?
U: She wants me to taper off propranolol over two weeks and then start candesartan, it's a blood pressure tablet that also prevents migraines.
A: Understood: taper propranolol over two weeks, then switch to candesartan. Did she give a start date or dose?
U: Start around mid May, 8 mg once a day. She also wants a blood test for kidney function two weeks after I start.
A: Saved: candesartan 8 mg daily from mid May, kidney function blood test two weeks after starting.
U: She also asked about my period tracking because some of my attacks line up with it.
A: That is called menstrual migraine. Would you like me to add cycle day to your diary template?
U: Yes, good idea. And she said magnesium glycinate might help, 300 mg at night.
A: Added magnesium glycinate 300 mg at night as a supplement to discuss and track.
""",
    "2026-05-14 07:50": """
U: First candesartan tablet this morning. Propranolol taper finished yesterday, my hands already feel warmer.
A: Great. Logged: candesartan 8 mg once daily started 2026-05-14, propranolol stopped 2026-05-13.
U: Can you remind me about the blood test? The practice said book it for 2026-05-28.
A: I'll remind you on 2026-05-27 about the kidney function blood test on 2026-05-28.
U: Also running update, I finished the couch to 5K last weekend! Ran the Hyde Park parkrun in 31:40.
A: Congratulations, that is a big milestone. Saved your first parkrun time: 31:40.
U: Callum says I should join his club, the Hyde Park Harriers, they run on Tuesday evenings.
A: Sounds fun. Tuesday evening group runs would also give your week a steady rhythm.
""",
    "2026-06-19 19:15": """
U: Quick update. Blood test was fine, kidneys normal. Only two migraines since starting candesartan.
A: That is excellent news. Two attacks in about five weeks is a big drop from seven a month in March.
U: I joined the Harriers and I've signed up for the Leeds Abbey Dash 10K on 2026-11-08.
A: Saved the race: Leeds Abbey Dash 10K on 2026-11-08. Do you want a training plan that builds up from 5K?
U: Yes, but nothing too intense, I'm still careful about dehydration bringing on a headache.
A: I'll keep the plan gentle, with a water reminder before each run.
U: Oh and Marmite the cat had her vaccinations, the vet said she's a bit overweight at 5.6 kilos.
A: Noted for Marmite: vaccinated, 5.6 kg, a little heavy. Maybe a puzzle feeder would slow her down.
U: And please keep answers short, I read these between lessons.
A: Will do: short and practical from now on.
""",
}

QUERIES = [
    ("single-hop", "Which medicine does Priya take when a migraine attack starts?", [("sumatriptan 50 mg", "2026-01-27")], []),
    ("single-hop", "How many doses of sumatriptan can Priya take in 24 hours?", [("no more than twice in 24 hours || maximum two doses", "2026-01-27")], []),
    ("single-hop", "Who is Priya's neurologist?", [("Dr. Adeyemi", "MEM", "2026-03-19")], []),
    ("single-hop", "What is Priya allergic to?", [("penicillin", "MEM", "2026-01-11|allergic to penicillin")], []),
    ("single-hop", "What was Priya's first parkrun time?", [("31:40", "2026-05-14|Ran the Hyde Park parkrun")], []),
    ("single-hop", "What app does Priya use for her headache diary?", [("Migraine Buddy", "MEM", "2026-01-27")], []),
    ("single-hop", "Which running club did Priya join?", [("Harriers", "MEM", "2026-06-19|I joined the Harriers")], []),
    ("single-hop", "How much does Marmite weigh?", [("5.6", "2026-06-19|Marmite the cat")], []),
    ("single-hop", "What supplement did the neurologist suggest for Priya?", [("magnesium glycinate", "2026-04-22|she said magnesium glycinate")], []),
    ("single-hop", "When was Priya's kidney function blood test booked for?", [("2026-05-28", "2026-05-14|book it for 2026-05-28")], []),
    ("single-hop", "How long did the aura last in Priya's bad attack in January?", [("twenty minutes", "2026-01-11|zigzag lights")], []),
    ("single-hop", "Who is Priya's GP?", [("Dr. Whitfield", "2026-01-27")], []),
    ("paraphrase", "Which drug makes Priya break out in spots?", [("penicillin", "MEM", "2026-01-11|allergic to penicillin")], [], "allergy, reworded"),
    ("paraphrase", "What sets off Priya's head pain episodes?", [("red wine", "MEM", "2026-01-11|Two of them came on days")], [], "triggers"),
    ("paraphrase", "Since changing pills, are Priya's digits less chilly?", [("hands already feel warmer", "2026-05-14")], []),
    ("paraphrase", "What did the lab results say about Priya's renal function?", [("kidneys normal", "2026-06-19")], []),
    ("paraphrase", "What beginner jogging programme did Priya's boyfriend persuade her into?", [("couch to 5K", "2026-03-19|Callum talked me into")], []),
    ("paraphrase", "Does anything about Priya's workplace aggravate the condition?", [("fluorescent", "2026-01-27|fluorescent tubes", "MEM")], []),
    ("paraphrase", "Why did the specialist want Priya off the beta blocker?", [("tired", "2026-04-22|thinks the propranolol is why I'm so tired", "MEM")], []),
    ("paraphrase", "What did the animal doctor think of Priya's pet's figure?", [("overweight", "2026-06-19|Marmite the cat")], []),
    ("temporal", "What migraine preventive is Priya on now?", [("candesartan", "MEM|Current migraine preventive", "2026-05-14|First candesartan")],
     ["2026-01-27|propranolol as a preventive || propranolol 40 mg twice daily", "2026-03-19|put the dose up to 80 mg || propranolol 80 mg twice daily"], "propranolol 40 -> 80 -> candesartan"),
    ("temporal", "What is Priya's current running goal?", [("Abbey Dash 10K", "MEM", "2026-06-19|signed up for the Leeds Abbey Dash")],
     ["2026-03-19|couch to 5K plan"], "couch to 5K, then a 10K race"),
    ("temporal", "How many migraines is Priya getting lately?", [("Only two migraines", "2026-06-19")],
     ["2026-03-19|maybe four this month", "2026-01-11|three attacks in the last fortnight"]),
    ("multi-hop", "How many weeks after her first neurology appointment did Priya start her new preventive?",
     [("2026-04-22", "2026-03-19|First appointment is on"), ("candesartan 8 mg once daily started", "2026-05-14")], [], "04-22 -> 05-14, about three weeks"),
    ("multi-hop", "Which two doctors changed Priya's medication, and to what?",
     [("80 mg twice a day", "2026-03-19"), ("start candesartan", "2026-04-22")], []),
    ("multi-hop", "What are all the things Priya should avoid to prevent attacks, and which medicine can she not take?",
     [("red wine", "MEM|Known triggers", "2026-01-11|Two of them came on days"), ("penicillin", "MEM|Allergic to penicillin", "2026-01-11|allergic to penicillin")], []),
    ("multi-hop", "Who got Priya into running and which club does that person belong to?",
     [("Callum talked me into", "2026-03-19"), ("his club, the Hyde Park Harriers", "2026-05-14")], []),
    ("negative", "What did Priya's dentist say about her wisdom teeth?", [], []),
    ("negative", "What is the name of Priya's dog?", [], [], "she has a cat"),
    ("negative", "Which marathon did Priya run last year?", [], []),
]
