"""A zoo part's name where a cluster is asked for trains that one device."""
import pytest

import roofline as rl
from roofline.errors import SpecError, UnknownNameError


def test_a_part_name_is_one_device_like_the_hardware_object():
    by_name = rl.train("resnet50", "h100-sxm5", global_batch=256)
    by_spec = rl.train("resnet50", rl.hardware("h100-sxm5"), global_batch=256)
    assert by_name.step_time == by_spec.step_time
    assert rl.cluster("h100-sxm5").devices == 1


def test_a_cluster_name_still_wins_and_typos_list_clusters():
    assert rl.cluster("dgx-h100").devices == 8
    with pytest.raises(UnknownNameError, match="unknown cluster 'dgx-h10O'.*dgx-h100"):
        rl.cluster("dgx-h10O")


def test_a_part_name_with_several_nodes_is_refused():
    with pytest.raises(SpecError, match="is one device"):
        rl.cluster("h100-sxm5", nodes=4)


def test_efficiency_for_keys_on_content_including_the_workspace():
    import dataclasses

    from roofline.engine.presets import efficiency_for

    h = rl.hardware("h100-sxm5")
    twin = dataclasses.replace(h)  # an equal copy: the same factors
    assert efficiency_for(twin, "default") == efficiency_for(h, "default")
    small = dataclasses.replace(h, workspace_bytes=1e6)  # only the workspace differs
    assert efficiency_for(small, "default").workspace == 1e6
    assert efficiency_for(h, "default").workspace != 1e6

