import pytest

from helpers.core.errors import ConfigError
from helpers.model.gpu_specs import gpu_spec, gpu_specs_frame, load_gpu_specs

REQUIRED = [
    "H100-SXM5-80GB",
    "H100-PCIe",
    "H200-SXM-141GB",
    "H800",
    "A100-SXM4-80GB",
    "L40S",
    "B200-SXM-180GB",
    "MI300X",
]


def test_table_is_dated_and_has_every_required_gpu_with_a_source():
    table = load_gpu_specs()
    assert table.as_of[:4].isdigit() and len(table.as_of) == 10
    names = [g.name for g in table.gpus]
    assert sorted(names) == sorted(REQUIRED)
    for g in table.gpus:
        assert "datasheet" in g.source.lower() or "data sheet" in g.source.lower(), g.name


@pytest.mark.parametrize(
    ("nvml_name", "expected"),
    [
        ("NVIDIA H200", "H200-SXM-141GB"),
        ("NVIDIA H100 80GB HBM3", "H100-SXM5-80GB"),
        ("NVIDIA H100 PCIe", "H100-PCIe"),
        ("NVIDIA A100-SXM4-80GB", "A100-SXM4-80GB"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA B200", "B200-SXM-180GB"),
        ("AMD Instinct MI300X", "MI300X"),
        ("H100-SXM5-80GB", "H100-SXM5-80GB"),  # the config's cost.gpu default
        ("h200 141gb", "H200-SXM-141GB"),
    ],
)
def test_nvml_and_table_names_match(nvml_name, expected):
    spec = gpu_spec(nvml_name)
    assert spec is not None and spec.name == expected


@pytest.mark.parametrize("name", ["NVIDIA H200 NVL", "NVIDIA A100 80GB PCIe", "NVIDIA GeForce RTX 4090", "", "H"])
def test_other_boards_do_not_match_by_substring(name):
    assert gpu_spec(name) is None


def test_dense_figures_are_half_the_sparse_headline():
    h100 = gpu_spec("H100-SXM5-80GB")
    # The datasheet headlines 1,979 BF16 / 3,958 FP8 TFLOPS "with sparsity".
    assert h100.bf16_dense_tflops == pytest.approx(1979 / 2, rel=0.01)
    assert h100.fp8_dense_tflops == pytest.approx(3958 / 2, rel=0.01)
    assert gpu_spec("MI300X").bf16_dense_tflops == pytest.approx(2614.9 / 2, rel=0.01)


def test_fp8_support_follows_architecture():
    assert not gpu_spec("A100-SXM4-80GB").supports_fp8
    for name in ["H100-SXM5-80GB", "H200-SXM-141GB", "H800", "L40S", "B200-SXM-180GB", "MI300X"]:
        assert gpu_spec(name).supports_fp8, name


def test_h200_memory_is_what_nvml_reports():
    assert gpu_spec("NVIDIA H200").memory_gib == pytest.approx(143771 / 1024)
    assert gpu_spec("B200-SXM-180GB").memory_gib == 180  # no NVML figure: datasheet GB read as GiB


def test_frame_has_one_row_per_gpu_with_source_and_date():
    df = gpu_specs_frame()
    assert len(df) == len(REQUIRED)
    assert {"source", "as of", "BF16 dense TFLOP/s", "FP8 dense TFLOP/s"} <= set(df.columns)
    assert df.loc[df.gpu == "A100-SXM4-80GB", "FP8 dense TFLOP/s"].isna().all()


def test_bad_file_names_file_and_field(tmp_path):
    bad = tmp_path / "specs.yaml"
    bad.write_text("as_of: '2026-01-01'\ngpus:\n  - name: X\n    vendor: intel\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"specs\.yaml: gpus\.0\.vendor"):
        load_gpu_specs(bad)


def test_duplicate_alias_is_rejected(tmp_path):
    import yaml

    from helpers.model.gpu_specs import SPECS_FILE

    data = yaml.safe_load(SPECS_FILE.read_text(encoding="utf-8"))
    data["gpus"][1]["nvml_names"].append("NVIDIA H200")
    p = tmp_path / "dup.yaml"
    p.write_text(yaml.safe_dump(data), encoding="utf-8")
    with pytest.raises(ConfigError, match="also a name of"):
        load_gpu_specs(p)


def test_every_priced_gpu_has_a_spec():
    from helpers.model.reference_data import load_gpu_prices

    for key in load_gpu_prices():
        if key != "cpu":
            assert gpu_spec(key) is not None, key
