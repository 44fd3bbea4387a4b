"""The example of data types, DLPack tensors and conversion hooks (in
docs/guide.md, which test_readme.readme() reads after the README) runs and
prints what the guide says it prints."""
import re

from test_readme import block_after, readme, run_python


def test_readme_types_example_runs(tmp_path):
    r = run_python(block_after("<!-- python-types-example -->", "python"), tmp_path)
    assert r.returncode == 0, r.stderr
    m = re.search(r"<!-- python-types-example -->\n```python\n.*?```\n\nprints\n\n```\n(.*?)```",
                  readme(), re.S)
    assert m, "docs/guide.md shows no output for the types example"
    assert r.stdout == m.group(1)
