/** The program a process worker runs, with its arguments and working directory. */
export interface Launch {
  file: string;
  args: readonly string[];
  cwd?: string;
}
