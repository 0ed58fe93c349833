"""One assertion for a refused request: the answer says ok false and carries one of the
expected kebab-case codes with a human message."""


def assert_refused(answer, *codes: str, rc: int | None = None) -> dict:
    """Assert that `answer` refuses with one of `codes` and return its error.

    `answer` is a wire answer (a dict) or a CLI result from `Benchd.bench` (anything with
    `rc` and `json`): a CLI refusal also exits non-zero (`rc` when given, else any).
    """
    assert codes, "name the code(s) the refusal must carry"
    if hasattr(answer, "rc"):
        assert answer.rc != 0 if rc is None else answer.rc == rc, answer
        parsed = answer.json
    else:
        parsed = answer
    assert isinstance(parsed, dict) and parsed.get("ok") is False, answer
    err = parsed.get("error")
    assert isinstance(err, dict) and err.get("code") in codes, (codes, answer)
    assert err.get("message"), answer
    return err
