KEY, NAME, FIRST = "tomas", "Tomás Herrera", "Tomás"
NOW = "2026-08-01"

MEMORY = [
    "Tomás Herrera, 41, architect in Valencia; travelling with his wife Lucía and son Mateo (9).",
    "Summer 2026 trip: Iceland then Norway, flying out of Valencia on 2026-07-18 (moved from 2026-07-04).",
    "Iceland: campervan from Reykjavik with Kuku Campers, pick-up booking KC-48213.",
    "Norway: four nights in a cabin near Geiranger, then the Hurtigruten coastal ferry from Ålesund to Trondheim.",
    "Mateo gets carsick on mountain roads; pack ginger sweets and give him the window seat.",
    "Lucía is vegetarian; Tomás does not eat shellfish.",
    "Tomás's passport was renewed in May 2026; new passport number ends in 7731.",
    "Travel budget for the summer trip: 9,500 euros in total, raised from 8,000.",
]

SESSIONS = {
    "2026-02-02 22:15": """
U: We've finally decided on the summer trip: Iceland first, then Norway. Lucía has wanted to see the fjords for years.
A: Lovely plan. How many days do you have in total, and who is going?
U: Three weeks, the three of us, me, Lucía and Mateo. Mateo is nine and obsessed with volcanoes.
A: Iceland will suit him then. Do you have dates yet?
U: Flying out of Valencia on 2026-07-04 and back on 2026-07-25. Budget is 8,000 euros for everything.
A: Saved: 2026-07-04 to 2026-07-25, budget 8,000 euros, family of three.
U: One thing, Mateo gets carsick on winding mountain roads, so long drives need planning.
A: Noted. Ginger sweets, a window seat and short stages usually help. I'll keep drives under three hours where possible.
""",
    "2026-03-08 10:40": """
U: For Iceland we want a campervan instead of hotels. I found Kuku Campers in Reykjavik.
A: A campervan gives you freedom on the Ring Road. Which model did you look at?
U: A four-berth with a heater, picked up at their Reykjavik depot. I booked it, reference KC-48213.
A: Saved the campervan booking KC-48213 with Kuku Campers, Reykjavik pick-up.
U: Lucía is vegetarian and I can't eat shellfish, so we'll mostly cook in the van.
A: Good to know for restaurant suggestions too: vegetarian options for Lucía, no shellfish for you.
U: Mateo wants to see a geyser erupt and touch a glacier.
A: Strokkur erupts every few minutes, and there are guided glacier walks on Sólheimajökull suitable for children from eight.
""",
    "2026-04-14 19:20": """
U: Bad news, my passport expires in September and Norway wants three months of validity after we leave.
A: Then you should renew it now. The Schengen rule is at least three months beyond your departure date.
U: I booked an appointment at the police station in Valencia for 2026-05-06.
A: Saved: passport renewal appointment 2026-05-06. Bring the old passport and a photo.
U: Also Lucía's sister is getting married on 2026-07-04, so we have to move the flights.
A: That clashes with your departure. What new dates are you thinking of?
U: Out on 2026-07-18 and back on 2026-08-08. The airline charged 240 euros to change all three tickets.
A: Updated: flights now 2026-07-18 to 2026-08-08, change fee 240 euros. I'll shift the campervan dates too.
""",
    "2026-05-20 21:00": """
U: New passport arrived, number ends in 7731. The old one is void now.
A: Saved the new passport, ending 7731. Remember to update the airline booking with the new number.
U: For Norway we've booked a cabin near Geiranger for four nights, it has a sauna and a view of the fjord.
A: Lovely. Four nights near Geiranger gives you time for the Skywalk at Dalsnibba and a fjord cruise.
U: After that we take the Hurtigruten coastal ferry from Ålesund up to Trondheim.
A: Saved: Hurtigruten from Ålesund to Trondheim after the cabin. It's an overnight sailing, Mateo will enjoy it.
U: Everything is pricier than we planned. We raised the budget to 9,500 euros.
A: Updated the budget to 9,500 euros. Iceland and Norway are both expensive, so that is realistic.
""",
    "2026-07-31 20:30": """
U: Back from Iceland, now in Norway. Mateo touched the glacier and hasn't stopped talking about it.
A: That's wonderful. How did the campervan go?
U: Great except a flat tyre near Vík, the Kuku people sent someone in an hour.
A: Good service. I'll note the flat tyre near Vík in case you review them later.
U: The cabin in Geiranger was booked for the wrong week, they fixed it but we lost a night.
A: Sorry to hear that. Do you want me to note a complaint or a refund request for the lost night?
U: Yes, they offered a refund of 180 euros, please remember to check it arrives.
A: Saved: Geiranger cabin owes a 180 euro refund for the lost night; I'll remind you to check your account in two weeks.
""",
}

QUERIES = [
    ("single-hop", "What is the booking reference for Tomás's campervan?", [("KC-48213", "2026-03-08", "MEM")], []),
    ("single-hop", "Which company rented the campervan to Tomás?", [("Kuku Campers", "2026-03-08", "MEM")], []),
    ("single-hop", "When was Tomás's passport renewal appointment?", [("2026-05-06", "2026-04-14")], []),
    ("single-hop", "What are the last digits of Tomás's new passport?", [("7731", "2026-05-20", "MEM")], []),
    ("single-hop", "How much did it cost Tomás to change the flights?", [("240 euros", "2026-04-14")], []),
    ("single-hop", "How many nights is the cabin near Geiranger booked for?", [("four nights", "2026-05-20|booked a cabin near Geiranger", "MEM")], []),
    ("single-hop", "Where does Tomás's family take the Hurtigruten ferry from and to?", [("Ålesund", "2026-05-20", "MEM")], []),
    ("single-hop", "Where did the campervan get a flat tyre?", [("near Vík", "2026-07-31")], []),
    ("single-hop", "How much refund did the Geiranger cabin offer?", [("180 euro", "2026-07-31")], []),
    ("single-hop", "What is Mateo obsessed with?", [("volcanoes", "2026-02-02")], []),
    ("single-hop", "What does Tomás do for a living?", [("architect", "MEM")], []),
    ("single-hop", "Which glacier walk did the assistant suggest for Mateo?", [("Sólheimajökull", "2026-03-08")], []),
    ("paraphrase", "Which food does Tomás avoid?", [("shellfish", "2026-03-08|can't eat shellfish", "MEM")], []),
    ("paraphrase", "What eases the motion sickness of Tomás's lad on bendy roads?", [("ginger", "2026-02-02", "MEM")], []),
    ("paraphrase", "Why did Tomás have to push the holiday back?", [("getting married", "2026-04-14")], []),
    ("paraphrase", "What extras come with the mountain lodge Tomás rented in Scandinavia?", [("sauna", "2026-05-20")], []),
    ("paraphrase", "How quickly did the rental firm respond to the puncture on Tomás's holiday?", [("sent someone in an hour", "2026-07-31")], []),
    ("paraphrase", "Why was Tomás's identity document a problem for the Scandinavian leg?", [("three months of validity", "2026-04-14")], []),
    ("paraphrase", "What is the diet of Tomás's spouse?", [("vegetarian", "2026-03-08|Lucía is vegetarian", "MEM")], []),
    ("paraphrase", "Which hot spring spout shoots water up most often, according to the suggestions for Tomás?", [("Strokkur", "2026-03-08")], []),
    ("temporal", "When does Tomás's family fly out for the summer trip?", [("2026-07-18", "2026-04-14|Out on 2026-07-18 || flights now 2026-07-18", "MEM")],
     ["2026-02-02|Flying out of Valencia on 2026-07-04 || Saved: 2026-07-04 to 2026-07-25"]),
    ("temporal", "What is the total budget for Tomás's summer trip?", [("9,500 euros", "2026-05-20", "MEM")],
     ["2026-02-02|Budget is 8,000 euros || budget 8,000 euros"]),
    ("temporal", "When does Tomás's family return from the trip?", [("2026-08-08", "2026-04-14")],
     ["2026-02-02|back on 2026-07-25 || Saved: 2026-07-04 to 2026-07-25"]),
    ("multi-hop", "Which two countries is Tomás visiting and how will they get around in each?",
     [("campervan", "2026-03-08|instead of hotels"), ("Hurtigruten", "2026-05-20|take the Hurtigruten")], []),
    ("multi-hop", "Did Mateo get to do the thing he wanted most on the trip?",
     [("touch a glacier", "2026-03-08"), ("touched the glacier", "2026-07-31")], []),
    ("multi-hop", "What went wrong with the campervan, and what was its booking reference?",
     [("flat tyre", "2026-07-31|Great except a flat tyre"), ("KC-48213", "2026-03-08")], []),
    ("multi-hop", "By how much did Tomás's trip budget grow between February and May?",
     [("8,000 euros", "2026-02-02|Budget is 8,000 euros"), ("9,500 euros", "2026-05-20|raised the budget")], []),
    ("negative", "Which hotel in Oslo did Tomás book?", [], []),
    ("negative", "What travel insurance did Tomás buy?", [], []),
    ("negative", "Did Tomás rent a car in Norway?", [], []),
]
