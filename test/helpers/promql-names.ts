// The metrics a PromQL expression names, read with Prometheus' own parser (@prometheus-io/lezer-promql, the one its
// web UI uses) rather than a pattern: a selector's name, `__name__="…"` matchers, and `{"name"}` quoted names. For
// tests that check alert rules and dashboards against what a gateway exports. A parse error throws, and so does a
// selector whose metric is not named exactly (a `__name__` regex, or none): such a query could name anything.
import { parser } from '@prometheus-io/lezer-promql';

/** A node of the parser's tree (its type is @lezer/common's, a package this repo does not name itself). */
type SyntaxNode = ReturnType<typeof parser.parse>['topNode'];

/** One vector selector: its metric, and its label matchers (label → operator and value, quotes removed). */
export interface Selector {
  metric: string;
  matchers: Map<string, { op: string; value: string }>;
}

export function selectorsOf(expr: string): Selector[] {
  const tree = parser.parse(expr);
  const selectors: Selector[] = [];
  const text = (node: SyntaxNode): string => expr.slice(node.from, node.to);
  tree.iterate({
    enter(ref) {
      if (ref.type.isError) throw new Error(`PromQL does not parse at ${ref.from}: ${expr.slice(Math.max(0, ref.from - 20), ref.from + 20)} (in ${expr})`);
      if (ref.name === 'VectorSelector') selectors.push(selectorOf(ref.node, text, expr));
    },
  });
  return selectors;
}

/** The metric names `expr` selects. */
export function metricNamesOf(expr: string): string[] {
  return selectorsOf(expr).map((s) => s.metric);
}

function selectorOf(node: SyntaxNode, text: (node: SyntaxNode) => string, expr: string): Selector {
  const matchers = new Map<string, { op: string; value: string }>();
  let metric = node.getChild('Identifier') === null ? undefined : text(node.getChild('Identifier') as SyntaxNode);
  for (const child of node.getChild('LabelMatchers')?.getChildren('QuotedLabelName') ?? []) metric = unquote(text(child)); // {"name", …}
  for (const kind of ['UnquotedLabelMatcher', 'QuotedLabelMatcher']) {
    for (const matcher of node.getChild('LabelMatchers')?.getChildren(kind) ?? []) {
      const nameNode = matcher.getChild('LabelName') ?? matcher.getChild('QuotedLabelName');
      const opNode = matcher.getChild('MatchOp');
      const valueNode = matcher.getChild('StringLiteral');
      if (nameNode === null || opNode === null || valueNode === null) throw new Error(`an incomplete matcher ${text(matcher)} in ${expr}`);
      matchers.set(kind === 'QuotedLabelMatcher' ? unquote(text(nameNode)) : text(nameNode), { op: text(opNode), value: unquote(text(valueNode)) });
    }
  }
  const byName = matchers.get('__name__');
  if (byName !== undefined) {
    if (byName.op !== '=') throw new Error(`a selector that names its metric by ${byName.op} "${byName.value}" could select anything: ${text(node)}`);
    metric = byName.value;
  }
  if (metric === undefined) throw new Error(`a selector without a metric name: ${text(node)}`);
  return { metric, matchers };
}

/** A PromQL string literal's value ("…", '…' or `…`); the expressions tested here escape nothing inside them. */
function unquote(literal: string): string {
  return literal.slice(1, -1);
}
