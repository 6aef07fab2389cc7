"""Every public result type has a notebook card (``_repr_html_``) and a one-line ``repr``, from
one mixin (``roofline._display.Display``): an instance of each is built and checked, and a
type that gains the mixin without a card here (or a card of its own) fails the inventory."""

import importlib
import re
from pathlib import Path

import pytest
from test_report import _check

import roofline as rl
from roofline._display import Display

SRC = Path(rl.__file__).resolve().parent


def _all_display_types() -> set[str]:
    """Every class in the package that inherits Display (the modules importing it, imported)."""
    for f in SRC.rglob("*.py"):
        if "_display import Display" in f.read_text(encoding="utf-8"):
            mod = ".".join(("roofline",) + f.relative_to(SRC).with_suffix("").parts)
            importlib.import_module(mod)
    out, todo = set(), list(Display.__subclasses__())
    while todo:
        c = todo.pop()
        if not c.__dict__.get("_construction_twin"):  # roofline._frozen's, only inside __init__
            out.add(c.__name__)
        todo += c.__subclasses__()
    return out


@pytest.fixture(scope="module")
def instances():
    from roofline.analysis.queueing import tail_latency
    from roofline.calibrate.validate import Row, Validation, summarize

    r = rl.solve("resnet50", "A100", batch=4, precision="fp16")
    s = rl.serve("llama-3.1-8b", "H100", batch=4)
    wl = rl.Workload(prompt=rl.lengths("uniform", 500, 1500),
                     output=rl.lengths("uniform", 50, 150), rate=10.0)
    slo = rl.SLO(ttft_p99=1.0, tpot_p99=0.05)
    plan = rl.plan_serving("llama-3.1-8b", "H100", devices=4, workload=wl, slo=slo,
                           requests=300)
    rows = (Row(name="mm", group="compute", measured_s=1e-3, spread=0.01, predicted_s=1.2e-3,
                bound_s=8e-4),)
    space = rl.Space(model=["llama-3.1-8b"], hardware=["H100", "A100"],
                     scenario=dict(phase="decode", batch=[1, 8, 64], context=[2048]))
    out = {
        "Result": r, "Table": r.ops, "Sweep": rl.sweep("resnet50", "A100", batch=[1, 8]),
        "ServeResult": s,
        "TrainingResult": rl.train("llama-3.1-8b", "dgx-h100", global_batch=64, seq_len=4096,
                                   tp=2),
        "Capacity": rl.serving_capacity("llama-3.1-8b", "H100", prompt_len=512, output_len=64,
                                        ttft_slo=1.0, tpot_slo=0.05),
        "Validation": Validation(hardware="box", rows=rows, summary=summarize(rows)),
        "Levers": r.levers(),
        "ServingPlan": plan, "PlanChoice": plan.best,
        "ServingSim": rl.simulate_serving("llama-3.1-8b", "H100", workload=wl, requests=300,
                                          slo=slo),
        "Sensitivity": rl.sensitivity(s),
        "Requirements": rl.requirements("resnet50", target_latency=5e-4, reference="A100",
                                        batch=4, precision="fp16"),
        "TCO": rl.tco("H100", devices=8, years=3),
        "Reliability": rl.reliability(devices=1024, job_hours=720, checkpoint_s=60,
                                      restart_s=600),
        "Placement": rl.place(3.6e12),
        "Economics": r.economics,
        "TailLatency": tail_latency(8.0, 0.1, servers=2),
        "ExploreResult": rl.explore(space, objectives=["tokens_per_s"],
                                    constraints=["fits"]),
        "Region": rl.region("austria"),
        "PartPrices": rl.price_quotes("H100"),
        "Hardware": rl.hardware("H100"), "Cluster": rl.cluster("dgx-h100"),
        "Model": rl.model("llama-3.1-8b"),
    }
    return out


#: specs keep their own constructor-like repr (``Hardware('h100-sxm5')``)
SPECS = ("Hardware", "Cluster", "Model")


def test_inventory_every_display_type_is_checked(instances):
    from roofline.report.cards import CARDS

    found = _all_display_types()
    # ImportedModel (a Model subclass) is shown by the Model card
    assert found - {"ImportedModel"} == set(instances) and "ImportedModel" in CARDS
    for name, obj in instances.items():
        assert type(obj).__name__ == name and isinstance(obj, Display)


@pytest.mark.parametrize("name", [
    "Result", "Table", "Sweep", "ServeResult", "TrainingResult", "Capacity", "Validation",
    "Levers", "ServingPlan", "PlanChoice", "ServingSim", "Sensitivity", "Requirements", "TCO",
    "Reliability", "Placement", "Economics", "TailLatency", "ExploreResult", "Region",
    "PartPrices", *SPECS])
def test_card_and_one_line_repr(instances, name):
    obj = instances[name]
    line = repr(obj)
    start, end = (f"{name}(", ")") if name in SPECS else (f"<{name}", ">")
    assert "\n" not in line and line.startswith(start) and line.endswith(end), line
    assert len(line) <= 300, line
    assert " object at 0x" not in line
    h = obj._repr_html_()
    _check(h)
    assert h.startswith('<div class="rl">')
    # a real card: key/value rows or a table, not the printout in a <pre>
    assert "<pre>" not in h and ('class="rl-kv"' in h or "rl-sort" in h), name
    page = obj.to_html()
    assert page.startswith("<!DOCTYPE html>") and "default-src 'none'" in page
    assert not re.search(r"""(?:src|href)\s*=\s*["'](?!#|data:)""", page)


def test_cards_hold_the_numbers(instances):
    """Spot checks: the card shows what the object holds."""
    from roofline.units import fmt_time

    sim = instances["ServingSim"]
    h = sim._repr_html_()
    for st in (sim.ttft, sim.tpot, sim.e2e):
        assert f'data-v="{st.p99!r}"' in h
    sens = instances["Sensitivity"]
    h = sens._repr_html_()
    for e in sens.elasticity[sens.times[0]]:
        assert f'data-v="{float(e)!r}"' in h
    req = instances["Requirements"]
    h = req._repr_html_()
    assert fmt_time(req.reference_time) in h
    assert all(f'data-v="{float(p)!r}"' in h for p, _ in req.frontier)
    hw = instances["Hardware"]
    h = hw._repr_html_()
    assert all(f'data-v="{hw.peak(d)!r}"' in h for d in hw.dtypes)
    assert f'data-v="{hw.memory_bytes_per_s!r}"' in h
    ex = instances["ExploreResult"]
    assert f"{ex.evaluated:,} of {ex.size:,}" in ex._repr_html_()
    assert len(re.findall(r"<tr>", ex._repr_html_())) >= len(ex.pareto)


def test_dataclass_results_stay_slotted(instances):
    """The mixin declares ``__slots__ = ()``: slotted results keep no per-instance ``__dict__``
    (the plain classes Table, Sweep, Levers and ExploreResult have one)."""
    assert Display.__dict__["__slots__"] == ()
    for name in ("Result", "ServeResult", "TrainingResult", "ServingSim", "ServingPlan",
                 "Sensitivity", "Requirements", "TCO", "Economics"):
        assert not hasattr(instances[name], "__dict__"), name
