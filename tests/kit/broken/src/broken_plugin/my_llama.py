from vllm.model_executor.models.llama import LlamaForCausalLM


class BrokenLlamaForCausalLM(LlamaForCausalLM):
    pass
