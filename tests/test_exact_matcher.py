"""ExactMatcher: whole-token matches over folded text (the substring pre-check never changes an answer)."""

from __future__ import annotations

from symi_memory.index.keyword import ExactMatcher


def test_whole_tokens_folded_and_identifiers() -> None:
    m = ExactMatcher.for_query("café deploy")
    assert m.classify("We deployed nothing at the CAFE") == (False, False)  # 'deploy' only inside 'deployed'
    assert m.classify("Deploy from the Café, twice.") == (True, False)  # case and accents folded
    assert m.classify("deploy only") == (False, False)
    ident = ExactMatcher.for_query("error ERR_42 happened")
    assert ident.classify("saw ERR_42 once") == (True, True)
    assert ident.classify("saw XERR_42 once") == (False, False)  # not a whole token
    # The same text classified twice (the fold is remembered) gives the same answer.
    assert m.classify("Deploy from the Café, twice.") == (True, False)
