// Validates an AsyncAPI document with the official parser (@asyncapi/parser,
// pinned by package-lock.json): node validate.mjs [FILE], the document read
// from FILE or from stdin. Prints every diagnostic, one a line:
// severity, rule, path in the document, message. Exits 1 when any has error
// severity (the parser then refuses the document), 2 when it cannot run.
import { readFileSync } from 'node:fs';
import { Parser, DiagnosticSeverity } from '@asyncapi/parser';

const names = {
  [DiagnosticSeverity.Error]: 'error',
  [DiagnosticSeverity.Warning]: 'warning',
  [DiagnosticSeverity.Information]: 'info',
  [DiagnosticSeverity.Hint]: 'hint',
};

try {
  const text = readFileSync(process.argv[2] ?? 0, 'utf8');
  const { diagnostics } = await new Parser().parse(text);
  let errors = 0;
  for (const d of diagnostics) {
    if (d.severity === DiagnosticSeverity.Error) errors++;
    console.log(`${names[d.severity] ?? d.severity} ${d.code} /${d.path.join('/')}: ${d.message}`);
  }
  process.exitCode = errors > 0 ? 1 : 0;
} catch (err) {
  console.error(`validate.mjs: ${err.stack ?? err}`);
  process.exitCode = 2;
}
