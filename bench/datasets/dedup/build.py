#!/usr/bin/env python3
"""Write the dedup dataset: a small stored memory (workspace/) and pairs.jsonl (stdlib only, deterministic).

Every stored fact has a key and sits on one line of one file. Each pair is a
new piece of text an agent might try to append, labelled:

    duplicate   restates a stored fact in other words; target = that fact's line
    change      updates or contradicts a stored fact; target = the line it supersedes
    unrelated   shares words with stored facts but says something new; target = null

    python3 build.py            # writes workspace/ and pairs.jsonl, then checks them
"""
from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
WS = HERE / "workspace"

# ------------------------------------------------------------------ stored memory
# (file, heading or None, [(key, text), ...]) blocks, in file order
MEMORY_TITLE = "# MEMORY.md · long-term facts about Hannah Ortiz"
MEMORY = [
    ("About Hannah", [
        ("home", "Hannah Ortiz lives in Portland, Oregon, in a two-storey house on SE Alder Street."),
        ("job", "She works as a freelance data-visualisation consultant; her biggest client is Cascade Transit."),
        ("partner", "Her partner is Mike Brennan, a high-school music teacher."),
        ("son", "Their son Leo was born on 2019-10-04 and is in first grade at Buckman Elementary."),
        ("dog", "The dog is Juniper, a three-year-old border collie mix adopted from the Oregon Humane Society."),
        ("tz", "Hannah's time zone is America/Los_Angeles; she prefers 24-hour times and metric units."),
        ("coffee", "She drinks oat-milk flat whites and no coffee after 14:00."),
        ("allergy", "Hannah is allergic to cashews; pistachios are fine."),
        ("phone", "She prefers text messages to phone calls and reads email only twice a day."),
    ]),
    ("Health", [
        ("doctor", "Primary care doctor: Dr. Anita Shah at Hawthorne Family Clinic."),
        ("dentist", "Dentist: Dr. Paul Nguyen; cleanings every six months, the next one on 2026-05-12."),
        ("eyes", "Hannah wears glasses for short sight (-2.25 in both eyes); contact lenses only for running."),
        ("run", "She runs 5 km on Tuesday and Thursday mornings along the Eastbank Esplanade."),
        ("yoga", "Yoga class on Wednesday evenings at 19:00 at Sunflower Studio."),
        ("vitd", "She takes 1,000 IU of vitamin D every morning from October to April."),
    ]),
    ("Work", [
        ("rate", "Her day rate is 850 dollars; invoices go out on the last working day of the month."),
        ("cascade", "Cascade Transit project: a ridership dashboard in Observable, due 2026-06-30."),
        ("contact", "Her contact at Cascade Transit is Marcus Lee, the head of planning analytics."),
        ("tools", "She builds charts with D3 and Observable Plot and keeps the data in DuckDB files."),
        ("laptop", "Work laptop: a 14-inch MacBook Pro from 2023 with 32 GB of memory."),
        ("accountant", "Her accountant is Rachel Kim at Northside Tax; quarterly estimates are due in April, June, September and January."),
        ("cowork", "She rents a desk at the Ladd's Addition coworking space on Mondays and Fridays."),
    ]),
    ("Home and family", [
        ("car", "The family car is a 2017 grey Subaru Outback."),
        ("bike", "Hannah commutes on a blue Surly cargo bike with a child seat."),
        ("school", "School drop-off is at 08:10; Mike does drop-off and Hannah does pick-up at 15:00."),
        ("swim", "Leo has swimming lessons on Saturdays at 10:00 at the Dishman pool."),
        ("piano", "Leo started piano with Mike at home, fifteen minutes after dinner."),
        ("parents", "Hannah's parents live in Tucson; her mother Elena calls on Sunday afternoons."),
        ("vet", "Juniper's vet is Dr. Kowalski at Belmont Animal Hospital."),
        ("dogfood", "Juniper eats a salmon and sweet potato kibble, two cups a day."),
        ("garden", "The back garden has four raised beds; tomatoes and beans go in after mid-May."),
        ("wifi", "The home Wi-Fi network is called alder-house; the router is a Google Nest Wifi in the hallway."),
        ("bins", "Garbage and recycling are collected on Wednesday mornings; compost every week, glass every other week."),
    ]),
]
DAILY = {
    "2026-03-02": [
        ("furnace", "Furnace service booked with Rose City Heating for 2026-03-18 at 09:00."),
        ("leo_teacher", "Leo's teacher is Ms. Alvarez; parent-teacher conference on 2026-03-12 at 16:30."),
        ("juniper_weight", "Juniper weighed 19.4 kg at the vet; Dr. Kowalski wants her closer to 18 kg."),
        ("tax_docs", "Sent the 2025 receipts folder to Rachel Kim for the tax return."),
        ("book_club", "Book club meets on the first Thursday of the month at Powell's; March book is a mystery set in Lisbon."),
    ],
    "2026-03-09": [
        ("spring_break", "Spring break plan: three nights at the coast in Manzanita, 2026-03-23 to 2026-03-26."),
        ("rental", "Booked the Manzanita cottage on Laneda Avenue for 720 dollars, dog allowed."),
        ("ceiling", "Water stain on the kitchen ceiling under the bathroom; plumber Dave Ortega comes on 2026-03-11."),
        ("password", "Family passwords are in Bitwarden; the shared folder is called Ortiz-Brennan."),
        ("mike_bday", "Mike's birthday is 2026-04-17; he wants a new metronome and a dinner at Ava Gene's."),
    ],
    "2026-03-16": [
        ("plumber_fix", "Dave Ortega replaced the wax ring under the upstairs toilet; the ceiling needs to dry for a week before painting."),
        ("cascade_meeting", "Weekly check-in with Cascade Transit on Tuesdays at 11:00 over Zoom."),
        ("invoice", "Invoice CT-2026-03 for 16 days sent to Cascade Transit; payment terms are 30 days."),
        ("leo_reading", "Leo is reading at a level J; Ms. Alvarez suggested the Frog and Toad books."),
        ("insurance", "Car insurance renews on 2026-04-30 with Pemberton Mutual, 1,140 dollars a year."),
    ],
    "2026-03-23": [
        ("coast_weather", "Arrived in Manzanita; rain all afternoon, Juniper loved the beach anyway."),
        ("crab", "Mike booked a crabbing trip in Wheeler for 2026-03-25 at 07:00."),
        ("new_client", "A second client, Willamette Water, asked for a proposal on a drought map by 2026-04-10."),
        ("sleep", "Leo has been waking at 05:30; trying blackout blinds in his room."),
        ("running_shoes", "Hannah's running shoes are Brooks Ghost 15, size 39; they have about 600 km on them."),
    ],
}

# ------------------------------------------------------------------ pairs
D, C, U = "duplicate", "change", "unrelated"
PAIRS = [
    # duplicates: rewordings of a stored fact (target = that fact)
    (D, "home", "Hannah's home is a two-floor house on Alder Street in SE Portland."),
    (D, "job", "Hannah is a self-employed consultant who makes data visualisations; Cascade Transit is her main client."),
    (D, "partner", "Mike Brennan, who teaches music at a high school, is Hannah's partner."),
    (D, "son", "Leo, born 4 October 2019, is a first grader at Buckman Elementary."),
    (D, "dog", "Juniper is a border collie cross, about three years old, adopted from the Oregon Humane Society."),
    (D, "coffee", "No coffee for Hannah after 2 pm; her usual is a flat white with oat milk."),
    (D, "allergy", "Cashews cause Hannah an allergic reaction (pistachios are okay)."),
    (D, "allergy", "Avoid cashew nuts in anything for Hannah, she is allergic."),
    (D, "phone", "Hannah would rather get a text than a call, and checks her inbox just twice daily."),
    (D, "doctor", "Hannah's GP is Dr. Anita Shah of the Hawthorne Family Clinic."),
    (D, "dentist", "Next dental cleaning with Dr. Nguyen is 12 May 2026; she goes twice a year."),
    (D, "eyes", "Hannah is near-sighted, -2.25 on each eye, wears glasses and uses contacts only when running."),
    (D, "run", "Tuesday and Thursday mornings Hannah runs five kilometres on the Eastbank Esplanade."),
    (D, "yoga", "Wednesday at 7 pm is yoga at Sunflower Studio."),
    (D, "vitd", "From October through April Hannah takes 1000 IU of vitamin D each morning."),
    (D, "rate", "Hannah charges 850 dollars per day and invoices on the final working day of each month."),
    (D, "rate", "Her daily rate: $850."),
    (D, "cascade", "The Cascade Transit ridership dashboard, built in Observable, is due at the end of June 2026."),
    (D, "contact", "Marcus Lee heads planning analytics at Cascade Transit and is Hannah's contact there."),
    (D, "tools", "Charts are made with D3 and Observable Plot; data lives in DuckDB files."),
    (D, "laptop", "Hannah's work machine is a 2023 MacBook Pro, 14 inch, 32 GB RAM."),
    (D, "accountant", "Rachel Kim of Northside Tax does Hannah's accounts; estimated tax is due in April, June, September and January."),
    (D, "cowork", "Mondays and Fridays Hannah works from her rented desk at the Ladd's Addition coworking space."),
    (D, "car", "They drive a grey Subaru Outback, model year 2017."),
    (D, "bike", "Hannah rides a blue Surly cargo bike with a kid seat to get around."),
    (D, "school", "Mike handles the 08:10 school drop-off and Hannah collects Leo at 3 pm."),
    (D, "swim", "Saturday 10:00 is Leo's swim lesson at Dishman pool."),
    (D, "piano", "After dinner Leo practises piano with his dad for a quarter of an hour."),
    (D, "parents", "Elena, Hannah's mother, phones on Sunday afternoons from Tucson, where Hannah's parents live."),
    (D, "vet", "Dr. Kowalski at Belmont Animal Hospital is Juniper's vet."),
    (D, "dogfood", "Juniper gets two cups a day of salmon and sweet potato dry food."),
    (D, "garden", "Four raised beds in the back garden; beans and tomatoes are planted after the middle of May."),
    (D, "wifi", "Wi-Fi at home: network alder-house, Google Nest Wifi router in the hall."),
    (D, "bins", "Wednesday morning is bin day: garbage, recycling and compost weekly, glass every second week."),
    (D, "furnace", "Rose City Heating will service the furnace on 18 March 2026 at 9 am."),
    (D, "leo_teacher", "Ms. Alvarez, Leo's teacher, has the parent-teacher conference with us on March 12 at 16:30."),
    (D, "juniper_weight", "At the vet Juniper was 19.4 kg; the target is nearer 18 kg."),
    (D, "book_club", "Book club is at Powell's on the first Thursday of each month; this month's pick is a Lisbon mystery."),
    (D, "spring_break", "For spring break we're going to Manzanita on the coast for three nights, March 23 to 26."),
    (D, "rental", "The Manzanita cottage (Laneda Avenue, dogs OK) cost 720 dollars."),
    (D, "ceiling", "There's a water mark on the kitchen ceiling below the bathroom; Dave Ortega the plumber is coming on March 11."),
    (D, "password", "Our passwords live in Bitwarden, shared folder Ortiz-Brennan."),
    (D, "mike_bday", "Mike turns a year older on April 17; he'd like a metronome and dinner at Ava Gene's."),
    (D, "plumber_fix", "The plumber swapped the wax ring under the upstairs toilet; let the ceiling dry a week before painting it."),
    (D, "cascade_meeting", "Cascade Transit check-in: every Tuesday, 11:00, on Zoom."),
    (D, "invoice", "Sent Cascade Transit invoice CT-2026-03 covering 16 days, due within 30 days."),
    (D, "insurance", "Pemberton Mutual car insurance, 1,140 dollars per year, renews 30 April 2026."),
    (D, "crab", "Crabbing in Wheeler is booked for March 25, 7 am (Mike arranged it)."),
    (D, "new_client", "Willamette Water wants a proposal for a drought map by April 10; they'd be a second client."),
    (D, "running_shoes", "Hannah runs in Brooks Ghost 15, size 39, now with roughly 600 km on them."),
    (D, "sleep", "Leo keeps waking up at half past five, so we're trying blackout blinds in his room."),
    # changes: updates that supersede a stored fact (target = that fact)
    (C, "home", "Hannah and Mike moved to a bungalow on NE Going Street in May 2026."),
    (C, "job", "Hannah took a full-time job as a visualisation lead at Cascade Transit and stopped freelancing."),
    (C, "son", "Leo moved from Buckman Elementary to Abernethy Elementary after spring break."),
    (C, "coffee", "Hannah switched to decaf; she no longer drinks caffeinated coffee at all."),
    (C, "phone", "Hannah now prefers phone calls for anything urgent; texts get lost in her notifications."),
    (C, "doctor", "Dr. Shah left Hawthorne Family Clinic; Hannah's new primary care doctor is Dr. Omar Haddad."),
    (C, "dentist", "The dental cleaning moved from May 12 to 2026-05-19."),
    (C, "eyes", "Hannah's new prescription is -2.75 in both eyes."),
    (C, "run", "Hannah now runs on Monday and Friday mornings instead of Tuesday and Thursday."),
    (C, "yoga", "Yoga moved to Thursday evenings at 18:30 at Sunflower Studio."),
    (C, "vitd", "The doctor raised Hannah's vitamin D to 2,000 IU a day, all year round."),
    (C, "rate", "From April 2026 Hannah's day rate is 900 dollars."),
    (C, "cascade", "The Cascade Transit dashboard deadline slipped to 2026-08-15."),
    (C, "contact", "Marcus Lee left Cascade Transit; Hannah's new contact there is Priya Desai."),
    (C, "tools", "Hannah moved her data from DuckDB files to a Postgres database on Neon."),
    (C, "laptop", "Hannah replaced her work laptop with a 16-inch MacBook Pro with 48 GB of memory."),
    (C, "accountant", "Hannah switched accountants: from now on her taxes are done by Luis Romero at Bridge Street CPA."),
    (C, "cowork", "Hannah gave up the coworking desk and works from home every day."),
    (C, "car", "We sold the Subaru; the family car is now a white 2024 Kia Niro EV."),
    (C, "bike", "Hannah's cargo bike was stolen; she now rides a green Tern GSD e-bike."),
    (C, "school", "From April Hannah does the school drop-off and Mike does pick-up."),
    (C, "swim", "Leo's swimming lessons moved to Sunday at 09:30."),
    (C, "piano", "Leo now has piano lessons with a teacher, Mrs. Okafor, on Thursday afternoons."),
    (C, "parents", "Hannah's parents moved from Tucson to Bend, Oregon."),
    (C, "vet", "Juniper's vet is now Dr. Ellis at Laurelhurst Veterinary; Belmont Animal Hospital closed."),
    (C, "dogfood", "Juniper switched to a lamb and rice kibble, one and a half cups a day, to help her lose weight."),
    (C, "wifi", "The Wi-Fi network is now called alder-mesh after the router was replaced by an eero mesh."),
    (C, "bins", "Collection day changed: bins now go out on Friday mornings."),
    (C, "furnace", "Rose City Heating moved the furnace service to 2026-03-25 at 13:00."),
    (C, "leo_teacher", "The parent-teacher conference was moved to March 19 at 17:00."),
    (C, "juniper_weight", "Juniper is down to 18.2 kg at the April weigh-in."),
    (C, "book_club", "Book club now meets on the last Tuesday of the month at the Belmont library."),
    (C, "spring_break", "Spring break at the coast is cancelled; we're staying home because Leo has a fever."),
    (C, "rental", "The Manzanita cottage booking was changed to the Neahkahnie house, 860 dollars."),
    (C, "password", "We moved the family passwords from Bitwarden to 1Password."),
    (C, "cascade_meeting", "The weekly Cascade Transit check-in moved to Wednesdays at 10:00."),
    (C, "insurance", "Car insurance moved to Columbia Shield; the premium is now 980 dollars a year."),
    (C, "crab", "The crabbing trip was pushed to March 26 at 08:00 because of the storm."),
    (C, "running_shoes", "Hannah bought new running shoes, Hoka Clifton 9 in size 39.5."),
    (C, "sleep", "Leo sleeps until 06:45 now that the blackout blinds are up."),
    # unrelated: share words with stored facts but say something new (target = null)
    (U, None, "Mike's school orchestra has a concert on 2026-05-21 at 19:00."),
    (U, None, "Juniper learned to ring a bell by the back door when she wants to go out."),
    (U, None, "Leo wants to learn the drums after seeing a band at the Dishman community centre."),
    (U, None, "Hannah's sister Carla is visiting Portland from Tucson in July."),
    (U, None, "Cascade Transit is opening a new MAX light rail line in 2027."),
    (U, None, "Hannah's friend Dr. Priya Shah, a dentist, is getting married in September."),
    (U, None, "Sunflower Studio also runs a pottery class on Saturday mornings."),
    (U, None, "The Subaru needs new wiper blades before the rainy season."),
    (U, None, "Hannah gave a talk on transit maps at the Portland Data Viz meetup."),
    (U, None, "Leo's friend Theo from Buckman Elementary is coming for a sleepover on Friday."),
    (U, None, "Mike is learning to make sourdough with a starter called Bob."),
    (U, None, "Hannah's mother Elena is taking a watercolour course in Tucson."),
    (U, None, "Rachel Kim recommended a separate bank account for business expenses."),
    (U, None, "The Eastbank Esplanade will be closed for repairs between the Hawthorne and Morrison bridges in June."),
    (U, None, "Hannah wants to try trail running in Forest Park this summer."),
    (U, None, "Leo's class is doing a project on salmon in the Willamette River."),
    (U, None, "Hannah ordered a second monitor for the coworking desk."),
    (U, None, "Juniper's border collie half makes her herd the neighbour's chickens."),
    (U, None, "The raised beds need new cedar boards next spring."),
    (U, None, "Marcus Lee recommended a book about Tokyo's railway maps."),
    (U, None, "Hannah is allergic to cats too, so no cat-sitting for the neighbours."),
    (U, None, "The Google Nest Wifi app shows Leo's tablet is online after bedtime; set a schedule."),
    (U, None, "Mike's brother lives in Manzanita and runs a surf shop."),
    (U, None, "Hannah's vitamin D blood level was checked in March: 34 ng/mL."),
    (U, None, "Ava Gene's closes on Mondays."),
    (U, None, "Dave Ortega also fixes gutters; ask him about the leaking downpipe in the autumn."),
    (U, None, "Willamette Water's office is next to the Ladd's Addition coworking space."),
    (U, None, "Leo's swimming teacher at Dishman is called Coach Rita."),
    (U, None, "Hannah uses Observable notebooks for her personal budget too."),
    (U, None, "Powell's has a children's reading hour on Saturday mornings; Leo liked it."),
]


def render() -> tuple[dict[str, list[str]], dict[str, tuple[str, int]]]:
    files: dict[str, list[str]] = {}
    where: dict[str, tuple[str, int]] = {}
    lines = [MEMORY_TITLE, ""]
    for heading, facts in MEMORY:
        lines += [f"## {heading}"]
        for key, text in facts:
            lines.append(f"- {text}")
            where[key] = ("MEMORY.md", len(lines))
        lines.append("")
    files["MEMORY.md"] = lines[:-1]
    for day, facts in DAILY.items():
        lines = [f"# {day}", ""]
        for key, text in facts:
            lines.append(f"- {text}")
            where[key] = (f"memory/{day}.md", len(lines))
        files[f"memory/{day}.md"] = lines
    return files, where


def main() -> int:
    files, where = render()
    keys = [k for _, facts in MEMORY for k, _ in facts] + [k for facts in DAILY.values() for k, _ in facts]
    errors = []
    if len(keys) != len(set(keys)):
        errors.append("duplicate fact keys")
    texts = [t for _, _, t in PAIRS]
    if len(texts) != len(set(texts)):
        errors.append("duplicate pair texts")
    stored = {t for lines in files.values() for t in lines}
    rows = []
    for i, (kind, key, text) in enumerate(PAIRS, 1):
        if kind not in (D, C, U):
            errors.append(f"pair {i}: bad kind {kind}")
        if (kind == U) != (key is None):
            errors.append(f"pair {i}: unrelated pairs and only they have no target")
        if key is not None and key not in where:
            errors.append(f"pair {i}: unknown fact {key}")
            continue
        if f"- {text}" in stored:
            errors.append(f"pair {i}: text is stored verbatim")
        target = None
        if key is not None:
            path, line = where[key]
            target = {"path": path, "startLine": line, "endLine": line}
        rows.append({"id": f"p{i:03d}", "text": text, "kind": kind, "target": target})
    if errors:
        print("\n".join(errors), file=sys.stderr)
        return 1
    if WS.exists():
        for p in sorted(WS.rglob("*"), reverse=True):
            p.unlink() if p.is_file() else p.rmdir()
    for path, lines in files.items():
        out = WS / path
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with open(HERE / "pairs.jsonl", "w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    counts = Counter(r["kind"] for r in rows)
    print(f"{len(keys)} stored facts in {len(files)} files; {len(rows)} pairs: "
          + ", ".join(f"{k} {counts[k]}" for k in (D, C, U)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
