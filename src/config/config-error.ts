/** One problem in a config file, located for an editor: `file:line:column: key.path: message`. */
export interface ConfigIssue {
  file: string;
  /** 1-based; 0 when the problem has no position in a file (e.g. it comes from an environment variable). */
  line: number;
  column: number;
  /** Dotted key path as written in the file, e.g. `upstreams.ci.url` or `tasks.rules[0].mode`; '' for the file. */
  path: string;
  message: string;
}

export function formatIssue(issue: ConfigIssue): string {
  const where = issue.line > 0 ? `${issue.file}:${issue.line}:${issue.column}` : issue.file;
  return issue.path === '' ? `${where}: ${issue.message}` : `${where}: ${issue.path}: ${issue.message}`;
}

/** Thrown by loadConfig/parseConfig with every problem found, not just the first. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  /** Same code as the gateway's startup config errors (e.g. tool-name collisions), so the CLI exits 2 for both. */
  readonly code = 'CONFIG';
  readonly errors: readonly ConfigIssue[];

  constructor(errors: readonly ConfigIssue[]) {
    super(errors.map(formatIssue).join('\n'));
    this.errors = errors;
  }
}
