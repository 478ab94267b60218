"""A keyword index in one JSON file per agent: the example of symi-memory's backend tutorial."""
