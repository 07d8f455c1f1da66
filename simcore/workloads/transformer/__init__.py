"""The transformer (GPT-style LLM) workload family: spec, generator, layers, memory, export."""
