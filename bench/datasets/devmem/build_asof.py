#!/usr/bin/env python3
"""Build asof.jsonl: "as of" queries over devmem's changing facts (stdlib only).

Each query asks about a fact that changes in the workspace and carries a date,
``as_of``. Its gold is the line or lines that state the value current on that
date, and ``stale`` lists the lines that state a value current at another
time (older or newer). Locations are written as (path, anchor) and resolved
with build_queries.py's helpers, so they follow edits of the notes.

Rules the builder enforces:

- a gold line in a dated note must not be dated after ``as_of`` (it had to
  exist on that date); undated topic notes and MEMORY.md can be gold when the
  line itself states the value for that period (history lines such as
  "Until 2026-06-20 the router was ...");
- gold and stale never overlap;
- evergreen summary lines that state several versions at once (for example
  "Diet history: A until May -> B from 05-19 -> C from 07-27") are in
  neither list.

``now`` is set to ``as_of`` (the clock for temporal decay on that day).

    python3 build_asof.py          # writes asof.jsonl
    python3 build_asof.py --check  # resolve and check only
"""
from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

sys.dont_write_bytecode = True
HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("devmem_build_queries", HERE / "build_queries.py")
bq = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bq)  # defines the helpers and the main queries; writes nothing on import

M, D, NET, LAB, HEALTH = bq.M, bq.D, bq.NET, bq.LAB, bq.HEALTH
FIN, PEOPLE, GARDEN, TW, OFF = bq.FIN, bq.PEOPLE, bq.GARDEN, bq.TW, bq.OFF
DATED = re.compile(r"(?:^|/)(\d{4}-\d{2}-\d{2})(?:-[^/]*)?\.md$")

ASOF: list[dict] = []


def A(query: str, as_of: str, gold: list[tuple[str, str]], stale: list[tuple[str, str]], note: str) -> None:
    ASOF.append({"query": query, "as_of": as_of, "gold": gold, "stale": stale, "note": note})


# ---------------------------------------------------------------- standup 09:45 -> 09:15 (06-08) -> 10:00 (08-03)
S0945 = [(D("2026-05-01"), "standup is daily at 09:45"), (D("2026-05-11"), "Standup (09:45)"),
         (D("2026-05-18"), "Standup 09:45"), (D("2026-05-29"), "standup is still at 09:45"),
         (D("2026-05-31"), "standup still at 09:45"), (D("2026-06-01"), "Standup at 09:45")]
S0915 = [(D("2026-05-29"), "Pieter at standup"), (D("2026-06-08"), "First day of the new standup time"),
         (D("2026-06-08"), "joins the 09:15 standup"), (D("2026-06-15"), "Standup at 09:15"),
         (D("2026-06-29"), "Standup 09:15"), (D("2026-07-06"), "Standup stays at 09:15"),
         (D("2026-07-13"), "Standup 09:15"), (D("2026-07-28"), "skipped the 09:15 standup")]
S1000 = [(M, "Standup: 10:00"), (D("2026-07-24"), "Samira confirmed the standup change"),
         (D("2026-08-03"), "First 10:00 standup"), (D("2026-08-24"), "standup at 10:00"), (D("2026-08-31"), "Standup 10:00")]
Q_STANDUP = "What time is the daily standup?"
A(Q_STANDUP, "2026-05-20", S0945[:3], S0915 + S1000, "09:45 until 06-05")
A(Q_STANDUP, "2026-07-01", S0915[:5], S0945 + S1000, "09:15 from 06-08 (announced 05-29)")
A(Q_STANDUP, "2026-08-10", [(M, "Standup: 10:00"), (D("2026-07-24"), "Samira confirmed the standup change"),
                            (D("2026-08-03"), "First 10:00 standup")], S0945 + S0915, "10:00 from 08-03")

# ---------------------------------------------------------------- home network: swap on 06-20
R_OLD = [(D("2026-05-25"), "Wi-Fi in Ilse's room is very weak"), (NET, "Until 2026-06-20 the router was")]
R_NEW = [(D("2026-06-20"), "Router swap done"), (NET, "- Router: `gatekeeper`"), (M, "Router: OPNsense")]
A("Which router do we have at home?", "2026-06-01", R_OLD, R_NEW, "FRITZ!Box 7530 until 06-20")
A("Which router do we have at home?", "2026-07-01", R_NEW, R_OLD, "OPNsense box from 06-20")
A("What is the default gateway address on the home LAN?", "2026-06-10",
  [(D("2026-05-25"), "(192.168.178.1)"), (NET, "Until 2026-06-20 the router was")],
  [(D("2026-06-20"), "New addressing"), (NET, "Gateway and LAN address of gatekeeper"),
   (NET, "- 10.20.0.1 — gatekeeper"), (M, "Router: OPNsense")], "192.168.178.1 before the swap")
A("What IP address does the Home Assistant box have?", "2026-05-10",
  [(D("2026-05-05"), "192.168.178.40"), (NET, "Old addresses before the swap")],
  [(D("2026-06-20"), "DHCP reservations"), (NET, "- 10.20.0.40 — atlas"), (LAB, "LAN IP 10.20.0.40"),
   (M, "Home Assistant runs on atlas")], "192.168.178.40 before the swap")
A("Which DNS server filters ads on the home network?", "2026-06-01",
  [(NET, "Old addresses before the swap")],
  [(D("2026-06-20"), "AdGuard Home now runs"), (NET, "- DNS: AdGuard Home")], "Pi-hole on atlas until 06-20")
A("What is the name of the home Wi-Fi network?", "2026-06-01",
  [(NET, "Until 2026-06-20 the router was")],
  [(D("2026-06-20"), "SSID `lombok-net`"), (NET, "Wi-Fi SSIDs")], "FRITZ!Box 7530 XK until 06-20")

# ---------------------------------------------------------------- people and appointments
DENT_OLD = [(D("2026-06-23"), "Letter from the dentist"), (HEALTH, "Previous dentist: Dr. Bakker")]
DENT_NEW = [(D("2026-06-30"), "Registered with the new dentist"), (HEALTH, "- Dentist: Dr. Emre Yilmaz"),
            (M, "Dentist: Dr. Emre Yilmaz"), (D("2026-07-22"), "First check-up with Dr. Yilmaz"),
            (D("2026-08-26"), "Dentist at 08:15 with Dr. Yilmaz"), (HEALTH, "same practice as Nadia since July 2026")]
A("Who is Nadia's dentist?", "2026-06-25", DENT_OLD, DENT_NEW, "Dr. Bakker until she retires on 06-30")
A("Who is Nadia's dentist?", "2026-07-25", DENT_NEW[:4], DENT_OLD, "Dr. Yilmaz from 06-30")
MGR_OLD = [(D("2026-05-04"), "Nadia's boss"), (PEOPLE, "Pieter de Wit — Flow's engineering manager until")]
MGR_NEW = [(M, "Manager: Samira Haddad"), (D("2026-07-06"), "Samira Haddad started today"),
           (PEOPLE, "Samira Haddad — Flow's engineering manager"), (D("2026-06-29"), "Pieter announced he moves")]
A("Who is Nadia's manager?", "2026-06-15", MGR_OLD, MGR_NEW, "Pieter de Wit until 07-03")
A("Who is Nadia's manager?", "2026-07-15", MGR_NEW, MGR_OLD, "Samira Haddad from 07-06")
ONE_OLD = [(D("2026-06-29"), "1:1 with Pieter stays on Thursdays"), (D("2026-07-02"), "Last 1:1 with Pieter")]
ONE_NEW = [(D("2026-07-06"), "First 1:1 with Samira"), (M, "1:1 with Samira on Mondays at 11:00"),
           (D("2026-07-20"), "1:1 with Samira (Monday 11:00)"), (D("2026-08-24"), "1:1 with Samira at 11:00")]
A("When is Nadia's weekly one-on-one with her manager?", "2026-06-30", ONE_OLD[:1], ONE_NEW,
  "Thursday 14:00 with Pieter")
A("When is Nadia's weekly one-on-one with her manager?", "2026-07-21", ONE_NEW[:3], ONE_OLD,
  "Monday 11:00 with Samira from 07-06")
A("Who is Ilse's teacher?", "2026-06-15",
  [(D("2026-06-01"), "Juf Marloes"), (D("2026-06-10"), "Juf Marloes")],
  [(D("2026-07-17"), "Meester Daan (Daan Verhoef)"), (D("2026-08-26"), "groep 5 with Meester Daan"),
   (D("2026-08-31"), "first day in groep 5")], "Juf Marloes in groep 4")
A("When are Ilse's swimming lessons?", "2026-06-20",
  [(D("2026-05-09"), "swimming lesson (zwemles) is on Saturdays"), (D("2026-05-15"), "Saturday: swimming 10:30"),
   (D("2026-05-16"), "Swimming at 10:30 at Krommerijn"), (D("2026-05-31"), "Ilse's swimming Saturday 10:30"),
   (D("2026-06-06"), "lessons resume next Saturday"), (D("2026-06-13"), "Swimming 10:30 at Krommerijn")],
  [(D("2026-07-11"), "lessons for diploma C move to Sundays"), (D("2026-08-29"), "first Sunday lesson"),
   (D("2026-08-31"), "Weekly rhythm from September")], "Saturdays 10:30 at Krommerijn before the summer")
A("Which evening does Nadia go bouldering?", "2026-06-01",
  [(D("2026-05-19"), "Tuesday bouldering")],
  [(D("2026-07-08"), "Bouldering moves from Tuesday to Thursday"), (M, "Bouldering on Thursdays"),
   (D("2026-08-28"), "Back to bouldering"), (D("2026-08-31"), "Weekly rhythm from September"),
   (D("2026-07-30"), "Missed Thursday bouldering")], "Tuesday until 07-08")
A("When is Nadia's Japanese lesson?", "2026-07-10",
  [(D("2026-05-13"), "every Wednesday"), (D("2026-05-27"), "Japanese lesson at 20:00"),
   (D("2026-07-08"), "Japanese lesson at 20:00")],
  [(D("2026-08-31"), "Japanese lessons resume"), (M, "Japanese: italki lessons"),
   (D("2026-08-31"), "Weekly rhythm from September")], "Wednesday 20:00 before September")
A("On which day is the on-call handover?", "2026-06-01",
  [(D("2026-05-18"), "handovers are on Mondays")],
  [(D("2026-06-30"), "On-call handover moves"), (M, "handover on Wednesdays"),
   (D("2026-08-31"), "on-call handover stays on Wednesdays")], "Monday until the 06-30 change")
A("When is Wei's mother coming to stay with us?", "2026-07-01",
  [(D("2026-06-21"), "from 2026-09-10")],
  [(D("2026-08-26"), "十月二号"), (M, "visiting Utrecht from 2026-10-02"), (D("2026-08-31"), "arrives 10-02")],
  "09-10 until the plan changed on 08-26")

# ---------------------------------------------------------------- health, pets, home
A("How much vitamin D does Nadia take per day?", "2026-05-20",
  [(D("2026-05-07"), "Nadia takes 1000 IU")],
  [(HEALTH, "vitamin D3 2000 IU a day"), (D("2026-06-03"), "38 nmol/L")], "1000 IU before the June blood test")
PHYSIO_W = [(D("2026-05-07"), "after that weekly on Wednesdays")]
PHYSIO_2W = [(D("2026-07-01"), "every two weeks")]
PHYSIO_END = [(D("2026-08-05"), "Final physio check"), (HEALTH, "discharged on 2026-08-05"), (M, "physio finished")]
A("How often does Nadia see the physio for her knee?", "2026-06-01", PHYSIO_W, PHYSIO_2W + PHYSIO_END, "weekly")
A("How often does Nadia see the physio for her knee?", "2026-07-20", PHYSIO_2W, PHYSIO_W + PHYSIO_END,
  "every two weeks from 07-01")
FOOD_B = [(D("2026-05-19"), "switch from Pawtrail"), (D("2026-05-19"), "first 12 kg bag of NorthKibble"),
          (D("2026-06-08"), "three weeks on the salmon food"), (D("2026-07-01"), "6 weeks into the salmon food")]
FOOD_C = [(D("2026-07-27"), "Biscuit started VetRelief HP"), (D("2026-08-07"), "VetRelief HP portioned"),
          (D("2026-08-29"), "four weeks on VetRelief HP")]
A("What is Biscuit eating?", "2026-06-20", FOOD_B[:3], FOOD_C, "NorthKibble salmon from 05-19")
A("What is Biscuit eating?", "2026-08-10", FOOD_C[:2], FOOD_B, "VetRelief HP from 07-27")
W = {"05": (D("2026-05-19"), "Weight 13.8 kg"), "06": (D("2026-06-03"), "13.6 kg"),
     "07": (D("2026-07-17"), "13.2 kg"), "08": (D("2026-08-24"), "Biscuit weigh-in at home: 13.0 kg")}
A("How much does Biscuit weigh?", "2026-06-10", [W["06"]], [W["05"], W["07"], W["08"]], "13.6 kg on 06-03")
A("How much does Biscuit weigh?", "2026-07-20", [W["07"]], [W["05"], W["06"], W["08"]], "13.2 kg on 07-17")
A("Which password manager does the family use?", "2026-05-20",
  [(D("2026-05-04"), "1Password family vault")],
  [(M, "Passwords: Bitwarden apps"), (D("2026-06-16"), "Bitwarden app"), (LAB, "CT 105 vaultwarden"),
   (D("2026-06-15"), "Vaultwarden deployed on hestia")], "1Password until the June migration")
A("Which bucket do the home server backups go to?", "2026-06-01",
  [(D("2026-05-15"), "bucket kessler-restic-2024"), (LAB, "Previous repository")],
  [(D("2026-07-03"), "Decision: new bucket"), (D("2026-07-03"), "Updated `/etc/restic/env`"),
   (LAB, "Repository since 2026-07-03"), (M, "Backups: restic every night")], "kessler-restic-2024 until 07-03")
A("What tariff are we on for electricity?", "2026-06-05",
  [(D("2026-05-31"), "Electricity bill for May")],
  [(D("2026-07-01"), "Dynamic energy tariff (StroomSlim) started"), (M, "Energy: StroomSlim")],
  "fixed EUR 0.31/kWh until 06-30")
A("How is the sourdough starter fed (ratio and flour)?", "2026-06-30",
  [(D("2026-06-27"), "Gert fed 1:5:5"), (D("2026-06-21"), "Gert fed 1:5:5"), (D("2026-06-13"), "Gert fed 1:5:5"),
   (D("2026-06-06"), "Gert fed 1:5:5"), (D("2026-05-31"), "fed 1:5:5 rye twice"), (D("2026-05-25"), "1:5:5 rye feed"),
   (D("2026-05-16"), "Gert fed 1:5:5"), (D("2026-05-09"), "fed Gert 1:5:5")],
  [(D("2026-07-19"), "Gert: now feeding 1:10:10"), (D("2026-08-29"), "Gert fed 1:10:10")], "1:5:5 rye before 07-19")
A("Which firmware version are the garden sensors running?", "2026-05-30",
  [(D("2026-05-27"), "firmware v0.1.0"), (GARDEN, "v0.1.0 —")],
  [(GARDEN, "v0.2.0 —"), (GARDEN, "v0.3.1 —"), (GARDEN, "v0.4.0 —"), (GARDEN, "v0.4.2 —"),
   (D("2026-08-28"), "firmware v0.4.2")], "v0.1.0 flashed 05-27")
A("How often do the balcony sensors wake up to take a reading?", "2026-07-01",
  [(D("2026-05-16"), "every 10 minutes"), (GARDEN, "v0.2.0 —")],
  [(D("2026-08-28"), "deep-sleep interval raised from 10 to 30 minutes"), (GARDEN, "v0.4.2 —")],
  "every 10 minutes until 08-28")

# ---------------------------------------------------------------- work
GO_OLD = [(D("2026-05-01"), "go-live target is 2026-07-15"), (D("2026-06-04"), "go/no-go for 2026-07-15"),
          (D("2026-06-12"), "draft 1: 10% of carriers on 07-15"), (TW, "the original go-live target was 2026-07-15")]
GO_NEW = [(D("2026-06-23"), "New cutover plan"), (OFF, "Tidewater go-live confirmed for Tuesday 2026-07-28")]
GO_DONE = [(D("2026-07-28"), "Tidewater 10% cutover at 10:00"), (TW, "2026-07-28: 10% cutover")]
A("When does Tidewater take its first production traffic?", "2026-06-15", GO_OLD, GO_NEW + GO_DONE,
  "planned for 07-15")
A("When does Tidewater take its first production traffic?", "2026-07-20", GO_NEW, GO_OLD, "re-planned for 07-28")
A("When will Tidewater handle all carriers?", "2026-07-25", GO_NEW,
  [(D("2026-06-12"), "draft 1: 10% of carriers on 07-15"), (D("2026-08-04"), "Tidewater is at 100%"),
   (TW, "Live for 100% of carriers since"), (M, "live for 100% of carriers since 2026-08-04")],
  "100% planned for 08-03 (07-21 in draft 1; happened 08-04)")
A("Is the old Celery ingester still running?", "2026-08-10",
  [(D("2026-08-04"), "only runs in shadow mode until 08-17")],
  [(D("2026-08-17"), "Celery ingester was decommissioned"), (TW, "The legacy Celery ingester was decommissioned"),
   (TW, "2026-08-17: legacy ingester decommissioned"), (TW, "Since 2026-08-17 there is no legacy path"),
   (TW, "- Legacy ingester: the old Celery/RabbitMQ service")], "shadow mode until 08-17")
P99 = {"0728": (D("2026-07-28"), "End of day: 10% stable"), "0804": (D("2026-08-04"), "Peak in the EU afternoon"),
       "tw0804": (TW, "Production peak (2026-08-04)"), "0817": (D("2026-08-17"), "p99 is creeping up"),
       "0824": (D("2026-08-24"), "p99 drifting to 520 ms"), "0828": (D("2026-08-28"), "TIDE-240 root cause"),
       "tw0824": (TW, "Production peak (2026-08-24)")}
A("What is Tidewater's end-to-end p99 latency in production?", "2026-08-01", [P99["0728"]],
  [v for k, v in P99.items() if k != "0728"], "380 ms at 10%")
A("What is Tidewater's end-to-end p99 latency in production?", "2026-08-10", [P99["0804"], P99["tw0804"]],
  [P99["0728"], P99["0817"], P99["0824"], P99["0828"], P99["tw0824"]], "450 ms at 100%")
A("Did Nadia's conference talk get accepted?", "2026-07-20",
  [(D("2026-07-10"), "decisions are expected on 08-01"), (D("2026-07-02"), "Talk submitted")],
  [(D("2026-08-03"), "talk was accepted"), (M, "Speaking at Backend Lowlands")], "submitted, decision due 08-01")
PROMO = {"0625": (D("2026-06-25"), "promotion case for Principal will be discussed"),
         "0720": (D("2026-07-20"), "two peer letters"), "0824": (D("2026-08-24"), "calibration committee"),
         "mem": (M, "Promotion to Principal Engineer")}
A("Where does Nadia's promotion case stand?", "2026-07-01", [PROMO["0625"]],
  [PROMO["0720"], PROMO["0824"], PROMO["mem"]], "to be discussed in the autumn cycle")
A("Where does Nadia's promotion case stand?", "2026-08-01", [PROMO["0720"]],
  [PROMO["0625"], PROMO["0824"], PROMO["mem"]], "needs two peer letters")
A("What finishing time is Nadia aiming for in the Singelloop?", "2026-06-01",
  [(D("2026-05-01"), "in under 55 minutes")], [(D("2026-08-28"), "new Singelloop goal")], "under 55 minutes")


# ---------------------------------------------------------------- build
def file_date(path: str) -> str | None:
    m = DATED.search(path) if path.startswith("memory/") else None
    return m.group(1) if m else None


def loc(path: str, anchor: str) -> dict:
    n = bq._find(path, anchor)
    return {"path": path, "start_line": n, "end_line": n}


def build() -> list[dict]:
    rows, errors = [], []
    for i, a in enumerate(ASOF, 1):
        qid = f"a{i:03d}"
        try:
            gold = [dict(loc(p, t), hop=1) for p, t in a["gold"]]
            stale = [loc(p, t) for p, t in a["stale"]]
        except SystemExit as exc:
            errors.append(f"{qid}: {exc}")
            continue
        for g in gold:
            day = file_date(g["path"])
            if day is not None and day > a["as_of"]:
                errors.append(f"{qid}: gold {g['path']} is dated after as_of {a['as_of']}")
        gkeys = {(g["path"], g["start_line"]) for g in gold}
        for s in stale:
            if (s["path"], s["start_line"]) in gkeys:
                errors.append(f"{qid}: {s['path']}:{s['start_line']} is gold and stale")
        if not gold or not stale:
            errors.append(f"{qid}: needs gold and stale")
        rows.append({"id": qid, "query": a["query"], "type": "temporal", "as_of": a["as_of"], "now": a["as_of"],
                     "gold": gold, "stale": stale, "note": a["note"]})
    if errors:
        raise SystemExit("\n".join(errors))
    return rows


def main() -> None:
    rows = build()
    if "--check" not in sys.argv:
        with open(HERE / "asof.jsonl", "w", encoding="utf-8", newline="\n") as fh:
            for r in rows:
                fh.write(json.dumps(r, ensure_ascii=False) + "\n")
    print(f"{len(rows)} as-of queries over {len({r['query'] for r in rows})} facts")


if __name__ == "__main__":
    main()
