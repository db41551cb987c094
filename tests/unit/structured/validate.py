"""Independent check of text generated under constraints (run by the C++ tests).

Input: a JSON file holding a list of cases, each
  {"kind": "schema", "schema": {...}, "docs": [...]}  -> json.loads (strict, no duplicate keys
                                                       unless "free_keys": true) and jsonschema
                                                       validation (formats too)
  {"kind": "regex", "regex": "...", "docs": [...]}    -> re.fullmatch
  {"kind": "search", "regex": "...", "docs": [...]}   -> re.search
  {"kind": "choice", "choices": [...], "docs": [...]} -> membership
Prints one line per failure and a summary; exit status 1 on any failure, 77 when jsonschema is
not installed (Debian: python3-jsonschema).
"""
import copy
import datetime
import json
import re
import sys

try:
    import jsonschema
except ImportError:
    print("python3-jsonschema is not installed")
    sys.exit(77)


def no_duplicates(pairs):
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        raise ValueError("duplicate key in %r" % keys)
    return dict(pairs)


def format_checker(cls):
    # jsonschema checks "time" / "date-time" only with rfc3339-validator, which Debian lacks:
    # check them with the standard library's ISO 8601 parser (Python >= 3.11 reads "Z").
    checker = copy.deepcopy(cls.FORMAT_CHECKER)
    checker.checks("time", raises=ValueError)(lambda s: not isinstance(s, str) or datetime.time.fromisoformat(s) is not None)
    checker.checks("date-time", raises=ValueError)(
        lambda s: not isinstance(s, str) or datetime.datetime.fromisoformat(s) is not None)
    return checker


def check(case, doc):
    kind = case["kind"]
    if kind == "schema":
        value = json.loads(doc, object_pairs_hook=None if case.get("free_keys") else no_duplicates)
        cls = jsonschema.validators.validator_for(case["schema"], default=jsonschema.Draft202012Validator)
        cls(case["schema"], format_checker=format_checker(cls)).validate(value)
    elif kind == "regex":
        if re.fullmatch(case["regex"], doc) is None:
            raise ValueError("no full match")
    elif kind == "search":
        if re.search(case["regex"], doc) is None:
            raise ValueError("no match")
    elif kind == "choice":
        if doc not in case["choices"]:
            raise ValueError("not one of the choices")
    else:
        raise ValueError("unknown case kind " + kind)


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        cases = json.load(f)
    total = failures = 0
    for case in cases:
        for doc in case["docs"]:
            total += 1
            try:
                check(case, doc)
            except Exception as e:  # any failure is reported with the document
                failures += 1
                what = case.get("schema", case.get("regex", case.get("choices")))
                print("FAIL %s %s: %r: %s" % (case["kind"], json.dumps(what)[:200], doc[:300], str(e)[:300]))
    print("checked %d documents, %d failures" % (total, failures))
    sys.exit(1 if failures else 0)


main()
