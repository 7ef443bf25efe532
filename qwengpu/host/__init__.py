"""Advanced mode: Qwen writes a CUDA kernel for a question, its own GPU layers run it.

``session`` is the loop (reply -> tool call -> compile and launch -> tool result -> answer);
``repliers`` who writes the replies (the model, teacher-forced text, a script); ``launcher``
where kernels run; ``toolcall`` reads calls in Qwen's XML and Hermes JSON conventions;
``prompts`` the tool and the system prompt; ``view`` the terminal view; ``evaluate`` the scoring
of ``qwengpu eval``; ``commands`` the CLI wiring.
"""
