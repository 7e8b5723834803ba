// `${VAR}` substitution in config strings, with the shell's default forms:
//   ${VAR}           value of VAR; an error when VAR is unset
//   ${VAR:-default}  default when VAR is unset or empty
//   ${VAR-default}   default only when VAR is unset
//   $${              a literal "${"
// No nesting and no other shell syntax: config values are data, not scripts.

export type Env = Readonly<Record<string, string | undefined>>;

export interface InterpolationResult {
  value: string;
  /** Problems such as unset variables; `value` then has an empty string in their place. */
  errors: string[];
}

const REFERENCE = /\$\$\{|\$\{([^}]*)\}|\$\{/g;
const BODY = /^([A-Za-z_][A-Za-z0-9_]*)(?:(:?-)([\s\S]*))?$/;

export function interpolate(input: string, env: Env): InterpolationResult {
  if (!input.includes('${')) return { value: input, errors: [] };
  const errors: string[] = [];
  const value = input.replace(REFERENCE, (match: string, body: string | undefined) => {
    if (match === '$${') return '${';
    if (body === undefined) {
      errors.push('unterminated "${" (write "$${" for a literal "${")');
      return '';
    }
    const parsed = BODY.exec(body);
    if (parsed === null) {
      errors.push(`malformed reference "${match}": expected \${NAME}, \${NAME:-default} or \${NAME-default}`);
      return '';
    }
    const [, name = '', operator, fallback = ''] = parsed;
    const current = env[name];
    if (operator === ':-') return current === undefined || current === '' ? fallback : current;
    if (operator === '-') return current === undefined ? fallback : current;
    if (current === undefined) {
      errors.push(`environment variable ${name} is not set (use \${${name}:-default} to give a default)`);
      return '';
    }
    return current;
  });
  return { value, errors };
}
