"""The data sets of the LLM runs as data, read by the spec, the data files (run/llm/data/) and the
sweep's planning; no torch. Two sources (`source_for`): `synthetic` (model tiny), four small sets
that run/llm/data/synthetic.py generates in the formats of the paper's sets; `hf` (llama3_8b), the
paper's sets, read from the local cache or LLM_DATASETS_DIR, never downloaded. The journal's
template subsets (TEMPLATES) are drawn from their parents with SUBSET_SEED (data/subsets.py).
"""

from __future__ import annotations

from dataclasses import dataclass

SUBSET_SEED = 0
SYNTHETIC_ROWS = {"alpaca": 1200, "grammar": 1200, "samsum": 800, "slimorca": 800}
SYNTHETIC_SEED = 2025


@dataclass(frozen=True)
class DataSet:
    name: str
    hf_id: str  # the paper's Hugging Face data set
    columns: tuple[str, ...]  # columns every row must have
    template: str | None = None  # torchtune.data's prompt template the tokenizer applies

    @property
    def builder(self) -> str:
        """torchtune's builder of the SFT data set (one per set, named after it)."""
        return f"torchtune.datasets.{self.name}_dataset"

    @property
    def prompt_template(self) -> str | None:
        return f"torchtune.data.{self.template}" if self.template else None


DATASETS: dict[str, DataSet] = {
    d.name: d
    for d in (
        DataSet("alpaca", "yahma/alpaca-cleaned", ("instruction", "input", "output")),
        DataSet(
            "grammar", "liweili/c4_200m", ("input", "output"), "GrammarErrorCorrectionTemplate"
        ),
        DataSet("samsum", "Samsung/samsum", ("dialogue", "summary"), "SummarizeTemplate"),
        DataSet("slimorca", "Open-Orca/SlimOrca-Dedup", ("conversations",)),
    )
}
# The journal's template subsets and their parent sets.
TEMPLATES = {"instruct": "alpaca", "summary": "samsum", "error-correction": "grammar"}
TEMPLATE_LABELS = {
    "instruct": "Instruct",
    "summary": "Summary",
    "error-correction": "Error Correction",
}


def parent_of(dataset: str) -> DataSet:
    return DATASETS[TEMPLATES.get(dataset, dataset)]


def source_for(model: str, data_source: str = "auto") -> str:
    """Where a run's data comes from: a spec's data_source (llm_spec) or, for `auto`, its model."""
    if data_source == "auto":
        data_source = "synthetic" if model == "tiny" else "real"
    return "hf" if data_source == "real" else "synthetic"
