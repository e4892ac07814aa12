from vllm.model_executor.models.llama import LlamaForCausalLM


class MyLlamaForCausalLM(LlamaForCausalLM):
    pass


class MyTinyLlama(LlamaForCausalLM):
    pass
