"""The transformer compiler: exact circuits in stock Qwen3.5 decoder layers."""
