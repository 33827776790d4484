// Kubernetes' OpenAPI schemas allow unknown fields (the API server only warns; `kubectl apply` refuses them with
// its default --validate=strict). This check catches them the way TypeScript catches excess properties: each object
// becomes an object literal typed with the kubernetes-models interface of its kind, and `tsc` (already the
// toolchain) reports any field, at any depth, that the official schema does not have.
import ts from 'typescript';
import { join } from 'node:path';

export interface K8sObject {
  label: string;
  object: { apiVersion: string; kind: string };
}

const ROOT = join(import.meta.dirname, '../..');

/** Diagnostics per object, `label: message`; empty when every object has only fields its schema knows. */
export function unknownFieldErrors(objects: readonly K8sObject[]): string[] {
  const types = new Map<string, string>();
  for (const { object } of objects) {
    const key = `${object.apiVersion}/${object.kind}`;
    if (!types.has(key)) types.set(key, `T${types.size}`);
  }
  const imports = [...types].map(([key, alias]) => `import type { I${key.split('/').pop()} as ${alias} } from 'kubernetes-models/${key}';`);
  const lines = objects.map(({ object }, i) => `export const o${i}: ${types.get(`${object.apiVersion}/${object.kind}`)} = ${JSON.stringify(object)};`);
  const fileName = join(ROOT, 'test', '__k8s_strict_check__.ts');
  const text = [...imports, ...lines].join('\n');
  const options: ts.CompilerOptions = {
    strict: true, noEmit: true, skipLibCheck: true, types: [],
    module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, target: ts.ScriptTarget.ES2022,
  };
  const host = ts.createCompilerHost(options);
  const getSourceFile = host.getSourceFile.bind(host);
  host.getSourceFile = (name, version, ...rest) => (name === fileName ? ts.createSourceFile(name, text, version) : getSourceFile(name, version, ...rest));
  const fileExists = host.fileExists.bind(host);
  host.fileExists = (name) => name === fileName || fileExists(name);
  const program = ts.createProgram([fileName], options, host);
  const source = program.getSourceFile(fileName)!;
  return [...program.getSyntacticDiagnostics(source), ...program.getSemanticDiagnostics(source)].map((d) => {
    const line = d.start === undefined ? -1 : source.getLineAndCharacterOfPosition(d.start).line - imports.length;
    const label = objects[line]?.label ?? 'imports';
    return `${label}: ${ts.flattenDiagnosticMessageText(d.messageText, ' ')}`;
  });
}
