"""Cluster zoo: values pinned to the data files, provenance, lookups and errors."""

from __future__ import annotations

import math

import pytest

import roofline as rl
from roofline.errors import SourceError, SpecError, UnknownNameError
from roofline.specs.cluster import Cluster, parse_cluster


def test_zoo_has_the_issue_clusters() -> None:
    assert set(rl.list_clusters()) >= {"dgx-a100", "dgx-h100", "hgx-h200", "gb200-nvl72",
                                        "tpu-v4-pod", "tpu-v5p-pod"}


def test_dgx_h100_128_nodes() -> None:
    c = rl.cluster("dgx-h100", nodes=128)
    assert isinstance(c, Cluster)
    assert c.devices == 1024  # 128 nodes × 8 GPUs
    assert c.device.key == "h100-sxm5"
    assert c.scale_up_bytes_per_s == pytest.approx(450e9)  # 900 GB/s bidirectional / 2
    assert c.scale_out_bytes_per_s == pytest.approx(50e9)  # 400 Gb/s / 8
    assert c.domain == 8


def test_values_pinned_to_data() -> None:
    a = rl.cluster("dgx-a100")
    assert a.device.key == "a100-sxm4-80gb"
    assert a.scale_up_bytes_per_s == pytest.approx(300e9)
    assert a.scale_out_bytes_per_s == pytest.approx(25e9)  # 200 Gb/s HDR per GPU
    assert a.node_overhead_w == pytest.approx(3300)  # 6500 W - 8 × 400 W
    nvl = rl.cluster("gb200-nvl72", nodes=18)
    assert nvl.devices == 72 and nvl.scale_up_domain == 72 and nvl.domain == 72
    assert nvl.scale_up_bytes_per_s == pytest.approx(900e9)
    v5p = rl.cluster("tpu-v5p-pod", nodes=16)
    assert v5p.devices == 64 and v5p.domain == 64  # capped by the cluster size
    assert v5p.scale_up_bytes_per_s == pytest.approx(600e9)  # 1200 GB/s bidirectional / 2


def test_every_number_has_a_source() -> None:
    for key in rl.list_clusters():
        c = rl.cluster(key)
        for f in ("scale_up.bandwidth", "scale_up.latency", "scale_out.bandwidth",
                  "scale_out.latency", "devices_per_node"):
            assert c.provenance[f].source.strip(), (key, f)
        for f, p in c.provenance.items():
            assert p.source and (p.derivation or p.note or not math.isnan(p.value)), (key, f)


def test_lookup_case_insensitive_and_aliases() -> None:
    assert rl.cluster("DGX H100").key == "dgx-h100"
    assert rl.cluster("selene", nodes=2).key == "dgx-a100"
    c = rl.cluster("dgx-a100", nodes=4)
    assert rl.cluster(c).nodes == 4 and rl.cluster(c, nodes=8).devices == 64


def test_unknown_cluster_suggests() -> None:
    with pytest.raises(UnknownNameError, match="dgx-a100"):
        rl.cluster("dgx-a10")


@pytest.mark.parametrize("nodes", [0, -1, 1.5, True])
def test_bad_nodes(nodes: object) -> None:
    with pytest.raises(SpecError, match="nodes"):
        rl.cluster("dgx-h100", nodes=nodes)  # type: ignore[arg-type]


def test_pod_size_limit() -> None:
    with pytest.raises(SpecError, match="largest published"):
        rl.cluster("tpu-v4-pod", nodes=2000)  # 1024 hosts × 4 chips = 4096 per pod


def _doc(**over: object) -> dict[str, object]:
    d: dict[str, object] = {
        "key": "mini", "name": "Mini", "device": "a100-sxm4-80gb",
        "devices_per_node": {"value": 4, "unit": "1", "source": "s"},
        "sources": {"s": "a test"},
        "scale_up": {"bandwidth": {"value": 100, "unit": "GB/s", "source": "s"},
                     "latency": {"value": 1, "unit": "us", "source": "s"}},
        "scale_out": {"bandwidth": {"value": 10, "unit": "GB/s", "source": "s"},
                      "latency": {"value": 5, "unit": "us", "source": "s"}},
    }
    d.update(over)
    return d


def test_parse_cluster_and_refuse_unsourced() -> None:
    c = parse_cluster(_doc(), nodes=3)
    assert c.devices == 12 and c.scale_up_domain == 4
    assert c.scale_out_latency_s == pytest.approx(5e-6)
    bad = _doc(scale_out={"bandwidth": {"value": 10, "unit": "GB/s"},
                          "latency": {"value": 5, "unit": "us", "source": "s"}})
    with pytest.raises(SourceError):
        parse_cluster(bad)
    with pytest.raises(SpecError, match="unknown top-level"):
        parse_cluster(_doc(colour="red"))
    with pytest.raises(SpecError, match="scale_up_domain"):
        parse_cluster(_doc(scale_up_domain={"value": 6, "unit": "1", "source": "s"}))


def test_cluster_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    p = tmp_path / "c.toml"
    p.write_text(
        'key = "mini"\nname = "Mini"\ndevice = "h100-sxm5"\n'
        'devices_per_node = { value = 8, unit = "1", source = "s" }\n'
        '[sources]\ns = "test"\n'
        '[scale_up]\nbandwidth = { value = 450, unit = "GB/s", source = "s" }\n'
        'latency = { value = 2, unit = "us", source = "s" }\n'
        '[scale_out]\nbandwidth = { value = 50, unit = "GB/s", source = "s" }\n'
        'latency = { value = 6, unit = "us", source = "s" }\n')
    c = rl.cluster(str(p), nodes=2)
    assert c.devices == 16 and c.device.key == "h100-sxm5"
    with pytest.raises(SpecError, match="cannot read"):
        rl.cluster(str(tmp_path / "missing.toml"))


def _out(**keys: object) -> dict[str, object]:
    d: dict[str, object] = {"latency": {"value": 5, "unit": "us", "source": "s"}}
    d.update({k: ({"value": v, "unit": "GB/s" if "band" in k else "1", "source": "s"})
              for k, v in keys.items()})
    return d


def test_nics_per_node_from_the_file() -> None:
    """[scale_out] per NIC: each device's share is nics x NIC rate / devices per node; the
    count alone keeps the per-device figure (4 devices per node in _doc)."""
    c = parse_cluster(_doc(scale_out=_out(nics=2, nic_bandwidth=12.5)))
    # 2 NICs x 12.5 GB/s / 4 devices = 6.25 GB/s per device; one NIC 6.25 x 4 / 2 = 12.5
    assert c.scale_out_bytes_per_s == pytest.approx(6.25e9) and c.nics == 2
    assert c.nic_bytes_per_s == pytest.approx(12.5e9)
    assert "2 NICs" in c.provenance["scale_out.bandwidth"].derivation
    more = parse_cluster(_doc(scale_out=_out(nics=16, bandwidth=50)))  # 16 NICs for 4 devices
    assert more.scale_out_bytes_per_s == pytest.approx(50e9)
    assert more.nic_bytes_per_s == pytest.approx(12.5e9)  # 50 x 4 / 16
    plain = parse_cluster(_doc())  # no count: one NIC per device at the per-device rate
    assert plain.nics_per_node is None and plain.nics == 4
    assert plain.nic_bytes_per_s == plain.scale_out_bytes_per_s
    assert "NICs" not in str(plain) and "2 NICs of 12.5 GB/s" in str(c)


@pytest.mark.parametrize("keys,match", [
    ({"nics": 0, "bandwidth": 10}, "nics must be a positive integer"),
    ({"nics": 2.5, "bandwidth": 10}, "nics must be a positive integer"),
    ({"nics": 5000, "bandwidth": 10}, "scale_out.nics"),
    ({"nics": 2, "bandwidth": 10, "nic_bandwidth": 5}, "not both"),
    ({"nic_bandwidth": 5}, "not 'nic_bandwidth' alone"),
    ({"nics": 2}, "needs 'bandwidth'"),
])
def test_nics_junk_refused(keys: dict[str, float], match: str) -> None:
    with pytest.raises(SpecError, match=match):
        parse_cluster(_doc(scale_out=_out(**keys)))


@pytest.mark.parametrize("bad", [0, -1, 2.0, True, "4", 2000])
def test_nics_per_node_validated_on_the_value(bad: object) -> None:
    from dataclasses import replace

    with pytest.raises(SpecError, match="nics_per_node"):
        replace(rl.cluster("dgx-a100"), nics_per_node=bad)


def test_zoo_nic_counts_sourced() -> None:
    """Every zoo cluster states its NICs per node with a source; the NVIDIA nodes have one per
    GPU (DGX A100 / H100 / H200 datasheets; GB200: 72 per rack over 18 trays)."""
    for key in rl.list_clusters():
        c = rl.cluster(key)
        assert c.nics_per_node is not None and c.provenance["scale_out.nics"].source, key
    assert {k: rl.cluster(k).nics for k in ("dgx-a100", "dgx-h100", "hgx-h200",
                                             "gb200-nvl72", "tpu-v5p-pod")} == {
        "dgx-a100": 8, "dgx-h100": 8, "hgx-h200": 8, "gb200-nvl72": 4, "tpu-v5p-pod": 1}
    assert rl.cluster("tpu-v5p-pod").nic_bytes_per_s == pytest.approx(50e9)  # 12.5 x 4 / 1
    assert "8 NICs of 50 GB/s per node" in rl.cluster("dgx-h100")._repr_html_()


def test_training_doc_nic_example_parses() -> None:
    """The [scale_out] block of docs/training.md ("Clusters") is a valid spec: 4 NICs of
    12.5 GB/s for 8 devices give each device 4 x 12.5 / 8 = 6.25 GB/s."""
    import re
    import tomllib
    from pathlib import Path

    text = (Path(__file__).parents[1] / "docs" / "training.md").read_text()
    block = re.search(r"```toml\n(\[scale_out\].*?)```", text, re.S)
    assert block is not None
    out = tomllib.loads(block.group(1))["scale_out"]
    doc = _doc(devices_per_node={"value": 8, "unit": "1", "source": "s"}, scale_out=out,
               sources={"s": "a test", "aws": "AWS", "assumed": "assumed"})
    doc["scale_up_domain"] = {"value": 8, "unit": "1", "source": "s"}
    c = parse_cluster(doc)
    assert c.scale_out_bytes_per_s == pytest.approx(6.25e9) and c.nics == 4


def test_source_id_must_be_defined() -> None:
    """A field's ``source`` names a key of ``[sources]``; an undefined one is refused, naming
    the field, the id and the ids defined (it was taken silently as its own citation)."""
    doc = _doc()
    doc["scale_out"]["latency"] = {"value": 5, "unit": "us", "source": "dgx"}  # type: ignore[index]
    with pytest.raises(SpecError, match=r"scale_out\.latency\.source='dgx' is not a key of "
                                        r"\[sources\]; defined: s"):
        parse_cluster(doc)
    doc = _doc(sources={})
    with pytest.raises(SpecError, match=r"devices_per_node\.source='s' .* defined: none"):
        parse_cluster(doc)
    with pytest.raises(SpecError, match=r"\[sources\] must map short ids to citation strings"):
        parse_cluster(_doc(sources={"s": 3}))
    # a defined id still resolves to its citation
    assert parse_cluster(_doc()).provenance["scale_out.latency"].source == "a test"
