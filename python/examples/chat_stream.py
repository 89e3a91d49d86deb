import sys
from hetero import Llama

llm = Llama(model_path=sys.argv[1], n_ctx=2048, verbose=False)
messages = [{"role": "user", "content": "Name three colours of the rainbow."}]
for chunk in llm.create_chat_completion(messages=messages, stream=True, max_tokens=64, temperature=0):
    delta = chunk["choices"][0]["delta"]
    print(delta.get("content", ""), end="", flush=True)
print()
llm.close()
