import json
import sys

import pytest

from helpers.core.config import HardwarePlan
from helpers.environment.hardware import GpuDevice, Inventory, hardware_plan_table, inventory, inventory_frame


@pytest.fixture(scope="module")
def inv() -> Inventory:
    return inventory()


def test_cpu_facts_are_real(inv):
    assert inv.cpu_logical_cores > 0
    assert inv.ram_gib > 0
    assert inv.cpu_model
    assert inv.hostname


def test_inventory_round_trips_through_json(inv):
    data = json.loads(inv.model_dump_json())
    assert Inventory.model_validate(data) == inv


def test_no_gpu_here_is_said_plainly(inv):
    try:
        import pynvml

        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
        pytest.skip("this machine has NVML")
    except pynvml.NVMLError:
        pass
    assert inv.gpu_count == 0 and inv.gpus == []
    assert inv.nvml_error and "NVML" in inv.nvml_error
    assert inv.statement.startswith("This machine has no usable GPU")
    assert inv.interconnect == "none (no GPU)"
    df = inventory_frame(inv)
    assert df.loc[df["item"] == "GPUs", "value"].iloc[0].startswith("none (")


def test_nvml_driver_error_is_reported_not_raised(monkeypatch):
    import pynvml

    def broken_init():
        raise pynvml.NVMLError(pynvml.NVML_ERROR_DRIVER_NOT_LOADED)

    monkeypatch.setattr(pynvml, "nvmlInit", broken_init)
    got = inventory()
    assert got.gpu_count == 0
    assert "Driver Not Loaded" in got.nvml_error
    assert got.cpu_logical_cores > 0


def test_missing_nvml_package_is_reported_not_raised(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml now raises ImportError
    got = inventory()
    assert got.gpu_count == 0
    assert "nvidia-ml-py is not installed" in got.nvml_error


def test_frame_lists_gpus_with_their_spec():
    gpus = [
        GpuDevice(
            index=i,
            name="NVIDIA H200",
            memory_total_mib=143771,
            compute_capability="9.0",
            nvlink_active_links=18,
            spec="H200-SXM-141GB",
        )
        for i in range(2)
    ]
    inv = Inventory(
        collected_at="2026-11-29T00:00:00+00:00",
        hostname="h",
        os="Linux",
        cpu_model="x",
        cpu_physical_cores=16,
        cpu_logical_cores=32,
        ram_gib=256.0,
        gpu_count=2,
        gpus=gpus,
        driver_version="580.1",
        cuda_driver_version="13.0",
        interconnect="NVLink (18-18 active links per GPU)",
        statement="2 GPUs",
    )
    df = inventory_frame(inv)
    assert "NVIDIA H200, 143,771 MiB, compute capability 9.0, spec H200-SXM-141GB" in set(df["value"])
    assert df.loc[df["item"] == "CUDA (driver)", "value"].iloc[0] == "13.0"


@pytest.mark.parametrize(("vendors", "only_vllm"), [("nvidia-only", False), ("amd-planned", True), ("mixed", True)])
def test_hardware_plan_rows_carry_the_seed_guidance(inv, vendors, only_vllm):
    df = hardware_plan_table(HardwarePlan(vendors=vendors, autoscaling=True, gpu_count=2), inv)
    assert list(df["question"])[0].startswith("GPU vendors")
    vendor_guidance = df["guidance"].iloc[0]
    assert vendor_guidance.startswith("Only vLLM") == only_vllm
    assert "62 s" in df["guidance"].iloc[1]
    assert df["answer"].iloc[2] == "2"
    assert df["found"].iloc[2].startswith(f"this machine: {inv.gpu_count} GPU(s)")


def test_real_two_h200_inventory_reads_back_and_renders():
    # Collected by inventory() on a 2 x H200 machine (NVML + nvidia-smi topo -m), 2026-11-29.
    from helpers.core.paths import REPO_ROOT

    data = json.loads((REPO_ROOT / "tests/fixtures/inventory-h200x2.json").read_text(encoding="utf-8"))
    inv = Inventory.model_validate(data)
    assert inv.gpu_count == 2 and all(g.spec == "H200-SXM-141GB" and g.memory_total_mib == 143771 for g in inv.gpus)
    assert inv.interconnect.startswith("NVLink")
    assert "NV18" in inv.topology and "\x1b" not in inv.topology
    df = inventory_frame(inv)
    assert (df["item"] == "GPU 1").any()


def test_interconnect_phrases():
    from helpers.environment.hardware import _interconnect

    def gpu(i, links):
        return GpuDevice(index=i, name="NVIDIA H200", memory_total_mib=1, nvlink_active_links=links)

    assert _interconnect([]) == "none (no GPU)"
    assert _interconnect([gpu(0, 18)]).startswith("single GPU")
    assert _interconnect([gpu(0, 18), gpu(1, 18)]) == "NVLink (18 active links per GPU)"
    assert _interconnect([gpu(0, 0), gpu(1, None)]) == "PCIe (no active NVLink)"
    assert _interconnect([gpu(0, 18), gpu(1, 0)]).startswith("mixed")
