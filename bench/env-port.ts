/** A TCP port from environment variable `name`; exits 2 naming `program` when it is not one. */
export function envPort(program: string, name: string): number {
  const value = Number(process.env[name]);
  if (!Number.isInteger(value) || value <= 0 || value > 65535) {
    process.stderr.write(`${program}: set ${name} to a TCP port (got '${process.env[name] ?? ''}')\n`);
    process.exit(2);
  }
  return value;
}
