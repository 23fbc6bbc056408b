"""The LLM fine-tuning workload: torchtune's own recipes, extended and fed by our components."""
