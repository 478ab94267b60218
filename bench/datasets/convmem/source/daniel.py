KEY, NAME, FIRST = "daniel", "Daniel Okoye", "Daniel"
NOW = "2026-07-15"

MEMORY = [
    "Daniel Okoye, 38, data analyst in Manchester; partner Amara; they own a terraced house in Levenshulme.",
    "Mortgage: remortgaged with Northway Building Society at 4.19 % fixed for five years from 2026-06-01 (previous deal 1.89 % ended 2026-05-31).",
    "Monthly mortgage payment: 1,046 pounds from June 2026 (was 812 pounds).",
    "Emergency fund target: six months of spending, 14,400 pounds; balance 9,150 pounds in July 2026.",
    "Pension: salary sacrifice at 8 % of salary from April 2026 (was 5 %); employer matches up to 6 %.",
    "Saving for a wedding in summer 2027; budget 12,000 pounds.",
    "Uses the YNAB app for budgeting; reviews it on the first Sunday of each month.",
]

SESSIONS = {
    "2026-01-04 11:00": """
U: New year money review time. Can you keep notes for me? Amara and I want to get serious about savings.
A: Happy to. What are the main goals?
U: An emergency fund first. Six months of spending is about 14,400 pounds and we have 6,200 at the moment.
A: Saved: emergency fund target 14,400 pounds, current balance 6,200.
U: Then the wedding next summer, we're aiming for 12,000 pounds all in.
A: Saved: wedding in summer 2027, budget 12,000 pounds.
U: Our mortgage deal at 1.89 percent ends on 2026-05-31, we pay 812 a month on it, and I'm dreading the new rate.
A: Noted. Lenders let you lock a new rate about six months ahead, so it's worth comparing offers now.
U: We use YNAB for budgeting, I try to look at it on the first Sunday of each month.
A: Saved: YNAB, monthly review on the first Sunday.
""",
    "2026-02-15 20:20": """
U: Broker came back with offers. Best is Northway Building Society, 4.19 percent fixed for five years, or 3.95 percent for two years.
A: The two-year deal is cheaper now but carries more risk when it ends. Which way are you leaning?
U: Five years, we want certainty with the wedding coming. Monthly payment goes from 812 to 1,046 pounds.
A: Saved: Northway 4.19 percent five-year fix, starting 2026-06-01, payment 1,046 pounds a month, up from 812.
U: The broker fee is 499 pounds, added to the loan.
A: Noted the 499 pound broker fee, added to the mortgage balance.
U: That's a lot more each month, we'll need to trim the takeaway budget.
A: Want me to look at your YNAB categories next month and suggest cuts?
""",
    "2026-04-06 09:40": """
U: New tax year. I've bumped my pension contribution from 5 to 8 percent through salary sacrifice.
A: Saved: pension salary sacrifice now 8 percent from April 2026, up from 5 percent. Does your employer match?
U: They match up to 6 percent, so the extra 2 is just me.
A: Noted the employer match up to 6 percent.
U: Takeaways were 310 pounds in March. Amara said let's cap it at 120.
A: Saved the new takeaway cap: 120 pounds a month, down from 310 spent in March.
U: Emergency fund is at 7,800 now.
A: Updated the emergency fund balance to 7,800 pounds.
""",
    "2026-06-01 08:15": """
U: New mortgage started today, first payment of 1,046 goes out on the 15th.
A: Saved: first payment on the new Northway deal on 2026-06-15.
U: Also Amara got a pay rise, 3,000 a year, so we'll put that into the wedding pot.
A: Nice. Saved: Amara's pay rise of 3,000 a year goes into wedding savings.
U: The wedding venue we like is Hallmoor Barn in the Peak District, they want a 2,000 pound deposit.
A: Saved: Hallmoor Barn in the Peak District, 2,000 pound deposit.
""",
    "2026-07-14 21:10": """
U: We paid the Hallmoor Barn deposit today, date is 2027-06-19.
A: Congratulations! Saved the wedding date 2027-06-19 at Hallmoor Barn, deposit paid.
U: Emergency fund is at 9,150 now, slower than I hoped because of the car MOT.
A: Updated the balance to 9,150 pounds. What did the MOT cost?
U: 640 pounds with new brake pads and a tyre.
A: Noted: MOT with brake pads and a tyre, 640 pounds.
U: Takeaways in June were 135, slightly over the cap but better.
A: Close to the 120 cap. Much better than March.
""",
}

QUERIES = [
    ("single-hop", "Which lender is Daniel's new mortgage with?", [("Northway", "2026-02-15|Best is Northway || Saved: Northway", "MEM")], []),
    ("single-hop", "How much was the broker fee?", [("499", "2026-02-15")], []),
    ("single-hop", "What is Daniel's emergency fund target?", [("14,400", "2026-01-04", "MEM")], []),
    ("single-hop", "What is the wedding budget?", [("12,000 pounds", "2026-01-04", "MEM")], []),
    ("single-hop", "Which budgeting app do Daniel and Amara use?", [("YNAB", "2026-01-04|We use YNAB || Saved: YNAB", "MEM")], []),
    ("single-hop", "Up to what percentage does Daniel's employer match pension contributions?", [("6 percent || up to 6 %", "2026-04-06", "MEM")], []),
    ("single-hop", "How big was Amara's pay rise?", [("3,000", "2026-06-01")], []),
    ("single-hop", "Where is the wedding venue?", [("Peak District", "2026-06-01")], []),
    ("single-hop", "What is the wedding date?", [("2027-06-19", "2026-07-14")], []),
    ("single-hop", "How much did the car MOT cost?", [("640 pounds", "2026-07-14")], []),
    ("single-hop", "When is the first payment on the new mortgage?", [("2026-06-15 || goes out on the 15th", "2026-06-01")], []),
    ("single-hop", "What two-year rate did the broker offer?", [("3.95 percent", "2026-02-15")], []),
    ("paraphrase", "Why did Daniel and his partner choose the longer fixed home loan?", [("certainty", "2026-02-15")], []),
    ("paraphrase", "What was Daniel's delivery meal bill just before the new tax year?", [("310", "2026-04-06|Takeaways were 310 || 310 spent")], []),
    ("paraphrase", "What ceiling did Daniel's household agree for delivered meals?", [("120", "2026-04-06|cap it at 120 || takeaway cap")], []),
    ("paraphrase", "What did Daniel's yearly roadworthiness test need?", [("brake pads", "2026-07-14")], []),
    ("paraphrase", "How much does Daniel have to put down to secure the reception place?", [("2,000 pound deposit", "2026-06-01")], []),
    ("paraphrase", "Where will Daniel's partner's extra earnings go?", [("wedding pot || wedding savings", "2026-06-01")], []),
    ("paraphrase", "Which rainy-day savings goal is Daniel's top priority?", [("emergency fund first", "2026-01-04")], []),
    ("paraphrase", "How often does Daniel go over the household finances?", [("first Sunday", "2026-01-04", "MEM")], []),
    ("temporal", "What is Daniel's mortgage interest rate?", [("4.19", "2026-02-15|Saved: Northway", "MEM")],
     ["2026-01-04|Our mortgage deal at 1.89 percent"]),
    ("temporal", "What is Daniel's monthly mortgage payment?", [("1,046", "2026-02-15|Saved: Northway", "2026-06-01", "MEM|Monthly mortgage payment")],
     ["2026-01-04|Our mortgage deal at 1.89 percent"]),
    ("temporal", "How much is in Daniel's emergency fund?", [("9,150", "2026-07-14", "MEM")],
     ["2026-01-04|we have 6,200 || current balance 6,200", "2026-04-06|Emergency fund is at 7,800 || balance to 7,800"]),
    ("single-hop", "What percentage of his salary does Daniel put into his pension?", [("8 percent || 8 %", "2026-04-06|I've bumped || now 8 percent", "MEM")],
     []),
    ("multi-hop", "How much more per month does Daniel pay on the new mortgage than before, and who is the lender?",
     [("812", "2026-02-15|Monthly payment goes"), ("Northway", "2026-06-01|Northway deal")], []),
    ("multi-hop", "How much is left to save to reach the emergency fund target?",
     [("14,400", "2026-01-04|Six months of spending"), ("9,150", "2026-07-14|Emergency fund is at 9,150")], []),
    ("multi-hop", "Did takeaway spending stay within the cap in June?",
     [("cap it at 120", "2026-04-06"), ("June were 135", "2026-07-14")], []),
    ("multi-hop", "What is the wedding venue and how much of the wedding budget does its deposit use?",
     [("Hallmoor Barn", "2026-07-14|We paid the Hallmoor Barn"), ("12,000 pounds", "2026-01-04|aiming for 12,000")], []),
    ("negative", "How much does Daniel have in bitcoin?", [], []),
    ("negative", "What is Daniel's car insurance renewal date?", [], []),
    ("negative", "Which credit card gives Daniel airline miles?", [], []),
]
