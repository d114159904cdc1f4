"""The official OpenAI Python client (PyPI `openai`) against onecard's router.

Run by tests/integration/router_http_test.cc with PYTHONPATH=.deps/python
(scripts/install-openai.sh):
    python3 openai_client.py HOST:PORT API_KEY LIMITED_KEY MODEL
It makes chat and completion requests, streaming and not, with usage and
logprobs, lists the models, and provokes 401, 400, 404 and 429, checking each
answer's shape as the client parses it. It prints one JSON object with what
the C++ test compares (the greedy texts, usage, the parsed errors) and exits
non-zero on the first failed check.
"""

import json
import sys

import openai

MESSAGES = [{"role": "user", "content": "What is the capital of France?"}]
MAX_TOKENS = 12


def check(condition, what):
    if not condition:
        raise AssertionError(what)


def chat(client, model):
    r = client.chat.completions.create(model=model, messages=MESSAGES, max_tokens=MAX_TOKENS,
                                       temperature=0)
    check(r.object == "chat.completion", r)
    check(r.choices[0].message.role == "assistant", r)
    u = r.usage
    check(u.prompt_tokens > 0 and u.completion_tokens > 0, u)
    check(u.total_tokens == u.prompt_tokens + u.completion_tokens, u)
    return {"text": r.choices[0].message.content, "finish_reason": r.choices[0].finish_reason,
            "usage": [u.prompt_tokens, u.completion_tokens, u.total_tokens]}


def chat_stream(client, model):
    text, roles, finish, usage, chunks = "", [], None, None, 0
    stream = client.chat.completions.create(model=model, messages=MESSAGES,
                                            max_tokens=MAX_TOKENS, temperature=0, stream=True,
                                            stream_options={"include_usage": True})
    for chunk in stream:
        chunks += 1
        check(chunk.object == "chat.completion.chunk", chunk)
        if chunk.usage is not None:
            usage = chunk.usage
            check(chunk.choices == [], chunk)
        for c in chunk.choices:
            if c.delta.role:
                roles.append(c.delta.role)
            text += c.delta.content or ""
            finish = c.finish_reason or finish
    check(roles == ["assistant"], roles)
    check(usage is not None, "no usage chunk")
    return {"text": text, "finish_reason": finish, "chunks": chunks,
            "usage": [usage.prompt_tokens, usage.completion_tokens, usage.total_tokens]}


def completions(client, model):
    prompt = "The capital of France is"
    r = client.completions.create(model=model, prompt=prompt, max_tokens=8, temperature=0,
                                  logprobs=2)
    check(r.object == "text_completion", r)
    lp = r.choices[0].logprobs
    check(len(lp.tokens) == r.usage.completion_tokens, lp)
    check(all(len(top) == 2 for top in lp.top_logprobs), lp)
    check(all(x <= 0 for x in lp.token_logprobs), lp)
    streamed, stream_usage = "", None
    for chunk in client.completions.create(model=model, prompt=prompt, max_tokens=8,
                                           temperature=0, stream=True,
                                           stream_options={"include_usage": True}):
        check(chunk.object == "text_completion", chunk)
        streamed += chunk.choices[0].text if chunk.choices else ""
        if chunk.usage is not None:
            stream_usage = chunk.usage
            check(chunk.choices == [], chunk)
    check(streamed == r.choices[0].text, (streamed, r.choices[0].text))
    check(stream_usage is not None, "no usage chunk")
    check((stream_usage.prompt_tokens, stream_usage.completion_tokens) ==
          (r.usage.prompt_tokens, r.usage.completion_tokens), (stream_usage, r.usage))
    return {"text": r.choices[0].text, "usage": [r.usage.prompt_tokens, r.usage.completion_tokens],
            "stream_usage": [stream_usage.prompt_tokens, stream_usage.completion_tokens]}


def chat_logprobs(client, model):
    r = client.chat.completions.create(model=model, messages=MESSAGES, max_tokens=3,
                                       temperature=0, logprobs=True, top_logprobs=2)
    content = r.choices[0].logprobs.content
    check(len(content) == r.usage.completion_tokens, content)
    for item in content:
        check(len(item.top_logprobs) == 2 and item.logprob <= 0, item)
        check(item.top_logprobs[0].logprob >= item.top_logprobs[1].logprob, item)
    return len(content)


def error_of(call):
    try:
        call()
    except openai.APIStatusError as e:
        return {"status": e.status_code, "type": e.type, "code": e.code, "param": e.param,
                "message": e.message,
                "retry_after": e.response.headers.get("retry-after")}
    raise AssertionError("no error")


def errors(base_url, key, limited_key, model):
    client = openai.OpenAI(base_url=base_url, api_key=key, max_retries=0)
    wrong = openai.OpenAI(base_url=base_url, api_key="not-a-key", max_retries=0)
    limited = openai.OpenAI(base_url=base_url, api_key=limited_key, max_retries=0)
    out = {
        "401": error_of(lambda: wrong.chat.completions.create(model=model, messages=MESSAGES)),
        "400_n": error_of(lambda: client.chat.completions.create(model=model, messages=MESSAGES,
                                                                 n=2)),
        "400_max_tokens": error_of(lambda: client.chat.completions.create(
            model=model, messages=MESSAGES, max_tokens=-5)),
        "404": error_of(lambda: client.chat.completions.create(model="gpt-9", messages=MESSAGES)),
    }
    limited.completions.create(model=model, prompt="Hi", max_tokens=1)  # the bucket's one
    out["429"] = error_of(lambda: limited.completions.create(model=model, prompt="Hi",
                                                             max_tokens=1))
    check(isinstance(_raised(lambda: wrong.models.list()), openai.AuthenticationError), "401")
    return out


def _raised(call):
    try:
        call()
    except Exception as e:  # noqa: BLE001 (the test wants the exception object)
        return e
    return None


def main():
    host_port, key, limited_key, model = sys.argv[1:5]
    base_url = f"http://{host_port}/v1"
    client = openai.OpenAI(base_url=base_url, api_key=key, max_retries=0, timeout=600)
    models = [m.id for m in client.models.list()]
    check(models == [model], models)
    out = {
        "models": models,
        "chat": chat(client, model),
        "chat_stream": chat_stream(client, model),
        "completions": completions(client, model),
        "chat_logprobs": chat_logprobs(client, model),
        "errors": errors(base_url, key, limited_key, model),
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
