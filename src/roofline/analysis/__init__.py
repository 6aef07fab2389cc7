"""Analysis on top of results: money, energy, carbon, water and failures (issue 13).

Modules: ``data`` (the sourced tables), ``power`` (device power model), ``economics`` (cost,
energy and carbon per unit of work of solve/serve/train results), ``carbon`` (regions and
placement), ``reliability`` (failure model, checkpoints, goodput), ``tco`` (total cost of
ownership) and ``mlsysim_compat`` (mlsysim 0.1.1's conventions under preset="mlsysim").
"""
