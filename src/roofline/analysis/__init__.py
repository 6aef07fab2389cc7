"""Analyses built on the scenarios: serving plans and simulations (and, from other modules,
levers, cost and energy). Each module exports its own names; nothing is imported here."""
