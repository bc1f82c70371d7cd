#!/usr/bin/env python3
"""scripts/check_includes.py on small repositories: a clean one passes; an include across a layer,
a top-level folder without a layer, SQL outside tracedb/ and listed debt that is gone each fail."""
import importlib.util
import os
import pathlib
import subprocess
import sys
import tempfile
import unittest

SCRIPT = pathlib.Path(__file__).resolve().parent.parent / "check_includes.py"


def repo_with(files):
    d = tempfile.mkdtemp(prefix="ptxevo-includes-")
    for path, text in files.items():
        p = pathlib.Path(d, path)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    subprocess.run(["git", "init", "-q", d], check=True)
    subprocess.run(["git", "-C", d, "add", "-A"], check=True)
    return d


_spec = importlib.util.spec_from_file_location("check_includes", SCRIPT)
_script = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_script)

# The known crossings and SQL sites the script lists must exist, or it reports them gone.
DEBT: dict = {}
for _f in _script.SQL_DEBT:
    DEBT[_f] = DEBT.get(_f, "") + 'auto q = db.prepare("SELECT 1");\n'



def check(d):
    return subprocess.run([sys.executable, str(SCRIPT), d], capture_output=True, text=True)


class CheckIncludesTest(unittest.TestCase):
    def test_clean_repository_passes(self):
        r = check(repo_with({**DEBT, "ir/module.hpp": "#include <vector>\n",
                             "evaluator/op.hpp": '#include "ir/module.hpp"\n',
                             "evaluator/tests/t.cpp": '#include "kernels/x.hpp"\n',  # tests may include anything
                             "cli/main.cpp": '#include "kernels/x.hpp"\n'}))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn(": ok", r.stdout)

    def test_a_crossing_fails_with_its_line(self):
        r = check(repo_with({**DEBT, "ir/module.hpp": '#include <vector>\n#include "evaluator/op.hpp"\n'}))
        self.assertEqual(r.returncode, 1)
        self.assertIn("ir/module.hpp:2: ir includes evaluator/op.hpp, but ir may include only nothing of ours",
                      r.stdout)

    def test_engine_code_never_includes_kernels(self):
        r = check(repo_with({**DEBT, "search/campaign.cpp": '#include "kernels/builtin_ops.hpp"\n'}))
        self.assertEqual(r.returncode, 1)
        self.assertIn("search/campaign.cpp:1: search includes kernels/builtin_ops.hpp", r.stdout)

    def test_a_folder_without_a_layer_fails(self):
        r = check(repo_with({**DEBT, "newlib/a.cpp": "int x;\n"}))
        self.assertEqual(r.returncode, 1)
        self.assertIn("top-level folders with sources but no layer: newlib", r.stdout)

    def test_listed_crossing_passes_and_paid_debt_must_leave_the_list(self):
        # The shipped list is empty: a copy of the script with one listed crossing.
        text = SCRIPT.read_text()
        marker = "KNOWN_DEBT: dict = {}"
        self.assertIn(marker, text)
        script = pathlib.Path(tempfile.mkdtemp(prefix="ptxevo-includes-script-"), "check_includes.py")
        script.write_text(text.replace(
            marker, 'KNOWN_DEBT: dict = {("exporter/old.cpp", "kernels/x/x_op.hpp"): "not moved yet"}'))
        listed = subprocess.run([sys.executable, str(script),
                                 repo_with({**DEBT, "exporter/old.cpp": '#include "kernels/x/x_op.hpp"\n'})],
                                capture_output=True, text=True)
        self.assertEqual(listed.returncode, 0, listed.stdout)
        paid = subprocess.run([sys.executable, str(script), repo_with({**DEBT, "exporter/old.cpp": "int x;\n"})],
                              capture_output=True, text=True)
        self.assertEqual(paid.returncode, 1)
        self.assertIn("exporter/old.cpp -> kernels/x/x_op.hpp is gone", paid.stdout)

    def test_sql_outside_tracedb_fails(self):
        r = check(repo_with({**DEBT, "tracedb/trace_db.cpp": 'auto q = db.prepare(\n    "SELECT id FROM campaigns");\n',
                             "search/new_thing.cpp": 'auto q = db_.connection().prepare(\n    "SELECT 1");\n'}))
        self.assertEqual(r.returncode, 1)
        self.assertIn("search/new_thing.cpp: writes SQL outside tracedb/", r.stdout)
        self.assertNotIn("tracedb/trace_db.cpp", r.stdout)

    def test_listed_sql_debt_passes_and_paid_debt_must_leave_the_list(self):
        # The shipped list is empty: a copy of the script with one listed file.
        text = SCRIPT.read_text()
        marker = "SQL_DEBT: dict = {}"
        self.assertIn(marker, text)
        script = pathlib.Path(tempfile.mkdtemp(prefix="ptxevo-includes-script-"), "check_includes.py")
        script.write_text(text.replace(marker, 'SQL_DEBT: dict = {"search/old.cpp": "a query not moved yet"}'))
        listed = subprocess.run([sys.executable, str(script), repo_with({**DEBT, "search/old.cpp": 'auto q = db.prepare("SELECT 1");\n'})],
                                capture_output=True, text=True)
        self.assertEqual(listed.returncode, 0, listed.stdout)
        paid = subprocess.run([sys.executable, str(script), repo_with({**DEBT, "search/old.cpp": "int no_sql_here;\n"})],
                              capture_output=True, text=True)
        self.assertEqual(paid.returncode, 1)
        self.assertIn("search/old.cpp writes no SQL any more: remove it from SQL_DEBT", paid.stdout)

if __name__ == "__main__":
    os.environ.setdefault("GIT_CONFIG_NOSYSTEM", "1")
    unittest.main()
