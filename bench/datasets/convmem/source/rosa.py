KEY, NAME, FIRST = "rosa", "Rosa Lindqvist", "Rosa"
NOW = "2026-11-10"

MEMORY = [
    "Rosa Lindqvist, nurse, owns a 1930s brick house in Uppsala with her husband Erik.",
    "Roofer: Takfix AB (contact Mattias); roof repaired in September 2026 for 48,000 SEK, ten-year guarantee.",
    "Boiler replaced by an air-to-water heat pump (Nibe S2125) installed 2026-10-21; old oil boiler removed.",
    "Kitchen renovation planned for spring 2027 with Snickeri Berg; quote 185,000 SEK.",
    "Plumber: Ali at Rörjouren Uppsala, 070-555 2290.",
    "Basement has a damp corner behind the laundry; dehumidifier runs at 55 % target humidity.",
    "Rosa does small jobs herself (painting, tiling), but anything electrical goes to a licensed electrician.",
]

SESSIONS = {
    "2026-06-08 19:00": """
U: We found a leak in the roof after last night's storm, water coming through the ceiling in the upstairs bedroom.
A: That needs attention soon. Is it an active drip now, and do you know where on the roof it comes from?
U: It stopped, but there's a brown stain around the chimney. I put a bucket in the loft.
A: Chimney flashing is a common culprit. I'd get a roofer to look before the autumn rains.
U: I asked two firms for quotes. Takfix AB said 52,000 SEK and Uppsala Tak said 61,000.
A: Saved both quotes: Takfix 52,000 SEK, Uppsala Tak 61,000 SEK. Do both include new flashing?
U: Takfix includes new flashing and a ten-year guarantee. Their guy is called Mattias.
A: Noted Mattias at Takfix AB, flashing included, ten-year guarantee.
""",
    "2026-07-19 14:30": """
U: The basement corner behind the laundry is damp again, it smells musty.
A: Damp basements are common in older brick houses. Do you have a dehumidifier down there?
U: Yes, I set it to 60 percent but it's not keeping up.
A: Try 55 percent and run it continuously through the humid months. Also check the gutter downpipe on that side.
U: Good point, the downpipe on the north side was disconnected! Erik fixed it.
A: That could explain the damp. Saved: north downpipe reconnected, dehumidifier target lowered to 55 percent.
U: Also the kitchen tap drips. I'll try changing the washer myself.
A: Turn off the isolation valve under the sink first. A washer is a small, cheap job.
""",
    "2026-09-12 17:15": """
U: Roof is done! Takfix came this week. They didn't need the extra scaffolding after all, so the final bill was 48,000 instead of the quoted 52,000.
A: Good result. Saved: roof repaired in September by Takfix, final cost 48,000 SEK, ten-year guarantee.
U: The oil boiler is on its last legs too. It's from 1994 and the service guy says parts are hard to find.
A: A 1994 oil boiler is well past its life. Are you thinking of a heat pump?
U: Yes, an air-to-water heat pump. We got a quote for a Nibe S2125, 165,000 SEK before the tax deduction.
A: Saved: Nibe S2125 heat pump quote, 165,000 SEK before the tax deduction.
U: The plumber who quoted it is Ali from Rörjouren Uppsala, number 070-555 2290.
A: Saved Ali at Rörjouren Uppsala with his number.
""",
    "2026-10-22 20:40": """
U: Heat pump installed yesterday, the old oil tank is gone from the basement. The house is so quiet.
A: Congratulations. Saved: Nibe S2125 heat pump installed on 2026-10-21, oil boiler removed.
U: The installer set the room temperature to 21 and said to leave it alone for two weeks.
A: Sensible, heat pumps work best when left at a steady temperature.
U: Now we're dreaming about the kitchen. Snickeri Berg quoted 185,000 SEK for new units and a worktop.
A: Saved: kitchen renovation quote from Snickeri Berg, 185,000 SEK. When would you want it done?
U: Spring 2027, after we've saved a bit again.
A: Noted: kitchen planned for spring 2027.
""",
    "2026-11-09 18:20": """
U: Can I move the kitchen light fitting myself when we renovate? It's just two wires.
A: In Sweden fixed electrical work should be done by a licensed electrician. I'd leave it to a professional.
U: Fair enough, Erik said the same. I'll stick to painting and tiling.
A: Saved: electrical work goes to a licensed electrician; you'll do painting and tiling.
U: The basement is dry now by the way, humidity meter says 52 percent.
A: Great, reconnecting the downpipe and the lower target worked.
""",
}

QUERIES = [
    ("single-hop", "Who is Rosa's contact at Takfix AB?", [("Mattias", "2026-06-08|Their guy is called Mattias || Noted Mattias", "MEM")], []),
    ("single-hop", "How much did Uppsala Tak quote for the roof?", [("61,000", "2026-06-08")], []),
    ("single-hop", "What guarantee does the roof repair have?", [("ten-year guarantee", "2026-06-08", "2026-09-12|Saved: roof", "MEM")], []),
    ("single-hop", "What model of heat pump did Rosa get?", [("Nibe S2125", "2026-09-12", "2026-10-22", "MEM")], []),
    ("single-hop", "What is Ali the plumber's phone number?", [("070-555 2290", "2026-09-12", "MEM")], []),
    ("single-hop", "Who quoted for the kitchen renovation?", [("Snickeri Berg", "2026-10-22", "MEM")], []),
    ("single-hop", "What room temperature did the installer set?", [("21", "2026-10-22|set the room temperature")], []),
    ("single-hop", "How old is Rosa's old oil boiler?", [("1994", "2026-09-12")], []),
    ("single-hop", "When was the heat pump installed?", [("2026-10-21", "2026-10-22", "MEM")], []),
    ("single-hop", "What is the basement humidity now?", [("52 percent", "2026-11-09")], []),
    ("single-hop", "Where did the brown stain appear after the storm?", [("around the chimney", "2026-06-08")], []),
    ("single-hop", "What did Rosa plan to replace on the dripping kitchen tap?", [("washer", "2026-07-19|I'll try changing the washer")], []),
    ("paraphrase", "What was wrong with the rain drain on the shady wall of Rosa's house?", [("disconnected", "2026-07-19")], []),
    ("paraphrase", "Which household jobs will Rosa do herself?", [("painting", "2026-11-09", "MEM")], []),
    ("paraphrase", "Can Rosa rewire the ceiling lamp on her own?", [("licensed electrician", "2026-11-09", "MEM")], []),
    ("paraphrase", "How did the air in Rosa's cellar seem?", [("musty", "2026-07-19")], []),
    ("paraphrase", "What's different for Rosa now that the new warming system is in?", [("so quiet", "2026-10-22")], []),
    ("paraphrase", "Why is Rosa's old furnace tricky to maintain?", [("parts are hard to find", "2026-09-12")], []),
    ("paraphrase", "When does Rosa hope to redo the cooking area?", [("spring 2027", "2026-10-22", "MEM")], []),
    ("paraphrase", "What should Rosa close before fixing the faucet?", [("isolation valve", "2026-07-19")], []),
    ("temporal", "What did the roof repair end up costing?", [("48,000", "2026-09-12", "MEM")],
     ["2026-06-08|Takfix AB said 52,000 || Takfix 52,000"], "quote 52,000 -> paid 48,000"),
    ("temporal", "What heats Rosa's house?", [("heat pump", "2026-10-22|Heat pump installed || installed on 2026-10-21", "MEM|Boiler replaced")],
     ["2026-09-12|The oil boiler is on its last legs"]),
    ("temporal", "What humidity is the basement dehumidifier set to?", [("55 percent || 55 %", "2026-07-19|Try 55 percent || lowered to 55", "MEM")],
     ["2026-07-19|I set it to 60 percent"]),
    ("multi-hop", "How much less did the roof cost than the other firm's quote?",
     [("61,000", "2026-06-08|Uppsala Tak said"), ("48,000", "2026-09-12|Saved: roof")], []),
    ("multi-hop", "Who quoted Rosa's heat pump, and when was it installed?",
     [("Ali from Rörjouren", "2026-09-12"), ("2026-10-21", "2026-10-22")], []),
    ("multi-hop", "What caused the basement damp and did fixing it work?",
     [("downpipe on the north side", "2026-07-19"), ("dry now", "2026-11-09")], []),
    ("multi-hop", "How much will the heat pump and kitchen cost together before deductions?",
     [("165,000", "2026-09-12|We got a quote"), ("185,000", "2026-10-22|Snickeri Berg quoted")], []),
    ("negative", "Which solar panels did Rosa install?", [], []),
    ("negative", "How much did Rosa's bathroom renovation cost?", [], []),
    ("negative", "What colour did Rosa paint the front door?", [], []),
]
