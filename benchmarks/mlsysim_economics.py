#!/usr/bin/env python3
"""Reference numbers of mlsysim 0.1.1's EconomicsModel, SustainabilityModel, ReliabilityModel and
Engine.solve energy, on its own registry examples, printed as JSON.

Run with the python of a venv that holds mlsysim==0.1.1 (benchmarks/setup_mlsysim_venv.sh);
roofline is not imported here and mlsysim is never a dependency of roofline. The output is
committed as tests/fixtures/mlsysim_economics.json; tests/test_economics_mlsysim.py checks that
roofline's preset="mlsysim" reproduces every number within 0.5 %.

    "$MLSYSIM_VENV/bin/python" benchmarks/mlsysim_economics.py \
        > tests/fixtures/mlsysim_economics.json
"""
import json
import warnings


def main():
    warnings.simplefilter("ignore")
    import mlsysim
    from mlsysim.core.engine import Engine
    from mlsysim.core.solver import EconomicsModel, ReliabilityModel, SustainabilityModel
    from mlsysim.hardware.registry import Hardware
    from mlsysim.infra.registry import Grids
    from mlsysim.models.registry import Models
    from mlsysim.systems.registry import Clusters

    clusters = {"Research_256": Clusters.Research_256, "Production_2K": Clusters.Production_2K,
                "Frontier_8K": Clusters.Frontier_8K, "Mega_100K": Clusters.Mega_100K}
    grids = {"US_Avg": Grids.US_Avg, "Quebec": Grids.Quebec, "Poland": Grids.Poland,
             "Norway": Grids.Norway}
    out = {"mlsysim": mlsysim.__version__, "sustainability": [], "economics": [],
           "reliability": [], "engine_energy": []}
    for cname, fleet in clusters.items():
        for gname, grid in [("default", None), *grids.items()]:
            for days, mfu in ((30.0, 1.0), (30.0, 0.45), (365.0, 0.6)):
                s = SustainabilityModel().solve(fleet, days, datacenter=grid, mfu=mfu)
                out["sustainability"].append({
                    "cluster": cname, "grid": gname, "days": days, "mfu": mfu,
                    "devices": fleet.total_accelerators,
                    "it_energy_kwh": s.it_energy_kwh.m_as("kWh"),
                    "total_energy_kwh": s.total_energy_kwh.m_as("kWh"),
                    "carbon_kg": float(s.carbon_footprint_kg.m_as("kg") if hasattr(
                        s.carbon_footprint_kg, "m_as") else s.carbon_footprint_kg),
                    "water_l": float(s.water_usage_liters.m_as("L") if hasattr(
                        s.water_usage_liters, "m_as") else s.water_usage_liters),
                    "pue": float(s.pue)})
                e = EconomicsModel().solve(fleet, days, datacenter=grid, mfu=mfu)
                out["economics"].append({
                    "cluster": cname, "grid": gname, "days": days, "mfu": mfu,
                    "capex_usd": float(e.capex_usd), "opex_energy_usd": float(e.opex_energy_usd),
                    "opex_maintenance_usd": float(e.opex_maintenance_usd),
                    "tco_usd": float(e.tco_usd)})
        for hours in (24.0, 720.0, 2160.0):
            for ckpt in (60.0, 300.0):
                r = ReliabilityModel().solve(fleet, hours, checkpoint_time_s=ckpt)
                out["reliability"].append({
                    "cluster": cname, "job_hours": hours, "checkpoint_s": ckpt,
                    "devices": fleet.total_accelerators,
                    "fleet_mtbf_h": r.fleet_mtbf.m_as("hour"),
                    "failure_probability": float(r.failure_probability),
                    "interval_s": r.optimal_checkpoint_interval.m_as("s"),
                    "expected_failures": float(r.expected_failures),
                    "goodput": float(r.goodput_ratio)})
    for mname, m in (("resnet50", Models.ResNet50), ("mobilenet_v2", Models.MobileNetV2)):
        for hname, hw in (("A100", Hardware.A100), ("H100", Hardware.H100), ("T4", Hardware.T4)):
            for batch in (1, 32):
                p = Engine.solve(m, hw, batch_size=batch, precision="fp16")
                out["engine_energy"].append({
                    "model": mname, "hardware": hname, "batch": batch,
                    "latency_s": p.latency.m_as("s"), "mfu": float(p.mfu),
                    "energy_j": p.energy.m_as("J")})
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
