#!/usr/bin/env python3
"""Negative runs of scripts/check-layers.py's state rule (issue 48 item 3): a copy of
src/engine/ with one violation injected at a time must fail the check, naming it; the
copy as it is must pass. Run by .ci/run beside the check itself.

Usage: python3 scripts/test_check_layers.py   (from anywhere)
"""

import importlib.util
import os
import shutil
import tempfile
import unittest


def read_text(path):
    """The text of `path`, the file closed after."""
    with open(path) as f:
        return f.read()


def write_text(path, text):
    """Writes `text` to `path`, the file closed after."""
    with open(path, "w") as f:
        f.write(text)

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("check_layers", os.path.join(HERE, "check-layers.py"))
check = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check)


class StateRule(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.engine = os.path.join(self.tmp, "engine")
        shutil.copytree(check.ENGINE, self.engine)

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def append(self, rel, text):
        with open(os.path.join(self.engine, rel), "a") as f:
            f.write(text)

    def edit(self, rel, old, new):
        path = os.path.join(self.engine, rel)
        code = read_text(path)
        self.assertIn(old, code)
        write_text(path, code.replace(old, new, 1))

    def test_the_tree_as_it_is_passes(self):
        self.assertEqual(check.state_errors(self.engine), [])

    def test_a_parameter_read_outside_is_caught(self):
        self.append("acquire/gate.rs", "\nfn peek(e: &crate::engine::Engine) -> usize {\n"
                    "    e.masters.len()\n}\n")
        errs = check.state_errors(self.engine)
        self.assertEqual(len(errs), 1, errs)
        self.assertIn("acquire/gate.rs:", errs[0])
        self.assertIn("`masters`", errs[0])

    def test_self_in_an_impl_engine_block_is_caught(self):
        self.append("observe/jobs.rs", "\nimpl Engine {\n    fn peek(&self) -> bool {\n"
                    "        self.settings.cluster\n    }\n}\n")
        errs = check.state_errors(self.engine)
        self.assertEqual(len(errs), 2, errs)
        self.assertTrue(all("observe/jobs.rs:" in e for e in errs), errs)
        self.assertTrue(any("`settings`" in e for e in errs), errs)
        self.assertTrue(any("`impl Engine` block outside" in e for e in errs), errs)

    def test_an_impl_engine_block_outside_is_caught(self):
        self.append("holding/urgent.rs", "\nimpl Engine {\n    fn peek(&self) -> usize {\n"
                    "        self.masters().len()\n    }\n}\n")
        self.append("coordination/job.rs", "\nimpl std::fmt::Debug for crate::engine::Engine {\n"
                    "    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {\n"
                    "        f.write_str(\"engine\")\n    }\n}\n")
        self.append("observe/graph.rs", "\n    impl<T> From<T> for Engine {\n    }\n")
        errs = check.state_errors(self.engine)
        self.assertEqual(len(errs), 3, errs)
        self.assertIn("holding/urgent.rs:", errs[0] + errs[1] + errs[2])
        self.assertTrue(any("coordination/job.rs:" in e and "for crate::engine::Engine" in e
                            for e in errs), errs)
        self.assertTrue(any("observe/graph.rs:" in e and "impl<T> From<T> for Engine" in e
                            for e in errs), errs)

    def test_impl_blocks_in_mod_rs_and_facade_and_other_types_pass(self):
        self.append("mod.rs", "\nimpl Engine {\n    fn peek(&self) -> bool {\n"
                    "        self.settings.cluster\n    }\n}\n")
        self.append("facade/queries.rs", "\nimpl Engine {\n    fn peek2(&self) -> bool {\n"
                    "        self.settings.cluster\n    }\n}\n")
        self.append("holding/urgent.rs", "\nimpl EngineLike {}\nimpl Foo for EngineLike {}\n"
                    "// impl Engine {\n")
        self.assertEqual(check.state_errors(self.engine), [])

    def test_a_weak_upgraded_and_a_held_engine_are_caught(self):
        self.append("holding/urgent.rs", "\nfn peek(w: &std::sync::Weak<Engine>) {\n"
                    "    if let Some(strong) = w.upgrade() {\n        strong.cleanups.close();\n"
                    "    }\n}\nfn peek2(h: &Held) -> usize {\n    h.engine().pubsub.channel_count()\n}\n")
        errs = check.state_errors(self.engine)
        self.assertEqual(len(errs), 2, errs)

    def test_an_accessor_call_or_a_comment_is_not_a_read(self):
        self.append("acquire/gate.rs", "\n// engine.masters is private\nfn peek(engine: &Engine)"
                    " -> usize {\n    engine.masters().len()\n}\n")
        self.assertEqual(check.state_errors(self.engine), [])

    def test_a_public_field_of_a_part_type_is_caught(self):
        self.edit("masters/mod.rs", "    quorum: usize,", "    pub(crate) quorum: usize,")
        errs = check.state_errors(self.engine)
        self.assertEqual(len(errs), 1, errs)
        self.assertIn("Masters::quorum is `pub(crate)`", errs[0])

    def test_a_missing_part_type_is_caught(self):
        self.edit("holding/mod.rs", "pub(crate) struct Holdings {", "pub(crate) struct Kept {")
        errs = check.state_errors(self.engine)
        self.assertTrue(any("Holdings is not defined" in e for e in errs), errs)


if __name__ == "__main__":
    unittest.main()
