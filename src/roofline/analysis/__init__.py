"""Analyses built on the scenarios. Each module exports its own names; nothing is imported here.

Serving plans and simulations: ``simulate``, ``scheduler``, ``queueing``, ``stepcost``,
``workload``. Money, energy, carbon, water and failures (issue 13): ``data`` (the sourced
tables), ``power`` (device power model), ``economics`` (cost, energy and carbon per unit of work
of solve/serve/train results), ``carbon`` (regions and placement), ``reliability`` (failure
model, checkpoints, goodput), ``tco`` (total cost of ownership) and ``mlsysim_compat`` (mlsysim
0.1.1's conventions under preset="mlsysim").
"""
