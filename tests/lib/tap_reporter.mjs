// SPDX-License-Identifier: MIT
// The node:test reporter meson reads (tests/integration/meson.build): TAP 13 with every test on
// one level, a nested test named after the suites above it ("suite > test"), so meson's parser
// counts each and has no indented lines to warn about. A suite, or a test that failed only
// because a subtest did, is not a line of its own (its subtests are). On a failure, standard
// error gets each failed test's error and the last lines the tests printed: meson shows a failed
// test's standard error, not its TAP.
const TAIL_LINES = 120;
const STACK_LINES = 4;

const escape = (s) => String(s).replace(/\\/g, '\\\\').replace(/#/g, '\\#').replace(/\n/g, ' ');
const indent = (s, pad) => String(s).split('\n').map((l) => pad + l).join('\n');

/** The error's message and where it was thrown (the first STACK_LINES frames). */
function errorText(err) {
  if (!err) return 'failed';
  const e = err.failureType === 'testCodeFailure' && err.cause ? err.cause : err;
  const lines = String(e.stack || e.message || e).split('\n');
  const frames = lines.findIndex((l) => /^\s+at /.test(l));
  return (frames < 0 ? lines : lines.slice(0, frames + STACK_LINES)).join('\n');
}

export default async function* tapFlat(source) {
  const names = []; // the suite or test started at each nesting level
  const tail = []; // the last lines the test files printed
  const failed = [];
  let n = 0;
  yield 'TAP version 13\n';
  for await (const { type, data } of source) {
    if (type === 'test:start') {
      names[data.nesting] = data.name;
      names.length = data.nesting + 1;
    } else if (type === 'test:pass' || type === 'test:fail') {
      const err = data.details?.error;
      if (data.details?.type === 'suite' || err?.failureType === 'subtestsFailed') continue;
      const name = [...names.slice(0, data.nesting), data.name].join(' > ');
      let line = `${type === 'test:pass' ? 'ok' : 'not ok'} ${++n} - ${escape(name)}`;
      if (data.skip !== undefined && data.skip !== false) line += ` # SKIP${data.skip === true ? '' : ` ${escape(data.skip)}`}`;
      else if (data.todo !== undefined && data.todo !== false) line += ` # TODO${data.todo === true ? '' : ` ${escape(data.todo)}`}`;
      yield `${line}\n`;
      if (type === 'test:fail') {
        const text = errorText(err);
        failed.push(`not ok - ${name}\n${indent(text, '    ')}`);
        yield `  ---\n  error: |-\n${indent(text, '    ')}\n  ...\n`;
      }
    } else if (type === 'test:diagnostic') {
      yield `${indent(data.message, '# ')}\n`;
    } else if (type === 'test:stdout' || type === 'test:stderr') {
      const lines = String(data.message).replace(/\n$/, '').split('\n');
      tail.push(...lines);
      tail.splice(0, Math.max(0, tail.length - TAIL_LINES));
      yield `${indent(lines.join('\n'), '# ')}\n`;
    }
  }
  yield `1..${n}\n`;
  if (failed.length > 0) {
    process.stderr.write(`${failed.length} failed:\n${failed.join('\n')}\n`);
    if (tail.length > 0) process.stderr.write(`the last ${tail.length} lines the tests printed:\n${tail.join('\n')}\n`);
  }
}
