"""The LLM fine-tuning workload: torchtune's own recipes, extended and fed by our components.

    assets.py    where generated/real model files live; the tiny llama3 and its byte tokenizer
    data.py      generated data sets (instruct, grammar, samsum, slimorca), template subsets,
                 DPO preference pairs, and the HF-cache loader for the real data sets
    tiny.py      model builders of the tiny llama3 (base, LoRA, QLoRA) named in configs
    weights.py   the `random` weights mode: a checkpointer that returns random Llama3-8B weights
    metrics.py   the metric logger torchtune instantiates from the config (steps.jsonl, summary)
    recipes.py   loads torchtune's installed recipe files by path and extends their classes
    compat.py    shims for torchtune's distributed recipes on CPU (no effect where CUDA exists)

The entry point is run/llm/tune.py; run/llm/spec.py says what a run spec holds.
"""

# File names inside a run folder, beside run.store's (spec.json, summary.json, steps.jsonl, log.txt).
TORCHTUNE_CONFIG = "torchtune_config.yaml"  # the exact config the recipe ran with
# Profiler outputs (torch traces, nsys reports) are named in run/node/profiling.py, for every workload.
TORCHTUNE_OUTPUT_DIR = "torchtune"  # torchtune's own output_dir (checkpoints are not written)
