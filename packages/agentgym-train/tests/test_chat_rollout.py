"""Token-in/token-out rollouts: the ids a rollout builds equal the chat template applied to the
whole conversation, the loss mask covers exactly the sampled tokens, and a template that rewrites
history is refused with a clear message."""

from __future__ import annotations

import pytest
from agentgym_train.models.chat import ChatFormat, ChatTemplateError
from agentgym_train.policies.base import BasePolicy, Generation
from agentgym_train.rollout.engine import RolloutEngine, Task
from agentgym_train.rollout.envs import LocalEnvs

from agentgym.parsers import format_action
from agentgym.plugins import get_env_spec


class ExpertWithTokens(BasePolicy):
    """A stand-in for a model that samples exactly the tokens of the env expert's reply (so the
    expected ids are known); ``generate`` gets the same requests a model would."""

    name = "expert-tokens"

    def __init__(self, chat: ChatFormat, stop: bool = True):
        self.chat, self.stop, self.prompts = chat, stop, []

    async def agenerate(self, requests, sampling):
        out = []
        for r in requests:
            self.prompts.append(list(r.prompt_ids))
            text = f"Thought: turn {r.meta['turn']}.\n" + format_action(r.action_format, await r.expert())
            ids = self.chat.encode(text) + ([self.chat.eot_id] if self.stop else [])
            out.append(Generation(text, ids, [-0.25] * len(ids), stopped=self.stop))
        return out


def _runs(ids, mask):
    runs, start = [], None
    for i, m in enumerate([*mask, 0]):
        if m and start is None:
            start = i
        elif not m and start is not None:
            runs.append(ids[start:i])
            start = None
    return runs


@pytest.mark.parametrize("tokenizer_name", ["chatml_tokenizer", "llama3_tokenizer"])
def test_rollout_ids_equal_the_template_over_the_whole_conversation(tokenizer_name, request):
    tokenizer = request.getfixturevalue(tokenizer_name)
    chat = ChatFormat(tokenizer)
    spec = get_env_spec("guess")
    policy = ExpertWithTokens(chat)
    engine = RolloutEngine(policy, {"guess": LocalEnvs(spec)}, max_turns=12)
    episodes = engine.run([Task("guess", t) for t in (1000, 1001, 1050)])
    for ep in episodes:
        assert ep.success and ep.num_turns >= 2
        messages = [m.model_dump() for m in ep.messages]
        whole = chat.encode(chat.render(messages, False))
        ids, mask = ep.tokens.ids, ep.tokens.loss_mask
        # Append-only: the rollout's ids are the whole conversation's, up to the last sampled token.
        assert whole[: len(ids)] == ids
        assert chat.encode(chat.render(messages, False)[len(tokenizer.decode(ids)) :]) == whole[len(ids) :]
        assert ids[-1] == chat.eot_id and ep.tokens.reward_index == len(ids) - 1 and mask[-1] == 1
        # The loss mask is 1 exactly on each reply's tokens and its end-of-turn token.
        replies = [m["content"] for m in messages if m["role"] == "assistant"]
        assert _runs(ids, mask) == [chat.encode(r) + [chat.eot_id] for r in replies]
        assert sum(mask) == sum(len(chat.encode(r)) + 1 for r in replies)
        assert [lp for lp, m in zip(ep.tokens.logprobs, mask, strict=True) if m] == [-0.25] * sum(mask)
        assert all(lp == 0.0 for lp, m in zip(ep.tokens.logprobs, mask, strict=True) if not m)
    # Each turn's prompt was the sequence so far (what the model conditions on), ending with the
    # generation prompt.
    gen_prompt = chat.encode(chat.render([{"role": "user", "content": "x"}], True))[-2:]
    assert all(p[-2:] == gen_prompt for p in policy.prompts)


def test_a_reply_cut_by_the_token_limit_gets_the_end_of_turn_token_as_template(chatml_tokenizer):
    chat = ChatFormat(chatml_tokenizer)
    engine = RolloutEngine(
        ExpertWithTokens(chat, stop=False),
        {"guess": LocalEnvs(get_env_spec("guess"))},
        max_turns=3,
    )
    (ep,) = engine.run([Task("guess", 1000)])
    ids, mask = ep.tokens.ids, ep.tokens.loss_mask
    eots = [i for i, t in enumerate(ids) if t == chat.eot_id]
    assert eots and all(mask[i] == 0 for i in eots)  # appended by the template, not sampled
    whole = chat.encode(chat.render([m.model_dump() for m in ep.messages], False))
    assert whole[: len(ids)] == ids


NOT_APPEND_ONLY = (
    "{%- for message in messages %}"
    "{%- if message['role'] == 'assistant' and not loop.last %}"
    "{{- '<|im_start|>assistant\\n(earlier reply)<|im_end|>\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


def test_a_template_that_rewrites_history_fails_clearly(chatml_tokenizer):
    chat = ChatFormat(chatml_tokenizer, chat_template=NOT_APPEND_ONLY)
    engine = RolloutEngine(ExpertWithTokens(chat), {"guess": LocalEnvs(get_env_spec("guess"))})
    with pytest.raises(ChatTemplateError, match="not append-only") as info:
        engine.run([Task("guess", 1000)])
    assert "(earlier reply)" in str(info.value)


def test_a_tokenizer_without_a_chat_template_is_refused(chatml_tokenizer):
    import copy

    tok = copy.deepcopy(chatml_tokenizer)
    tok.chat_template = None
    with pytest.raises(ChatTemplateError, match="no chat template"):
        ChatFormat(tok)


def test_end_of_turn_token_is_found_from_the_template(chatml_tokenizer, llama3_tokenizer):
    assert ChatFormat(chatml_tokenizer).eot_text == "<|im_end|>"
    llama = ChatFormat(llama3_tokenizer)
    assert llama.eot_text == "<|eot_id|>"
    assert set(llama.stop_ids) == {
        llama3_tokenizer.convert_tokens_to_ids(t) for t in ("<|eot_id|>", "<|end_of_text|>")
    }
