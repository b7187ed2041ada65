#!/usr/bin/perl
# The warm engine's server (conversion/warm.py starts it, one per sandbox): LaTeXML loaded and its session
# prepared once, then one fork per conversion, so that every conversion starts from the same clean state.
#
# Arguments: latexmlc's options of one profile, without the source. The working directory (/work in the
# sandbox) holds one conversion at a time: `input.tex` (or the files of a paper) in, the destination and
# the log out, as latexmlc run there on `./input.tex` (`./SOURCE`) would write them. This process reads no
# TeX: it prepares the session as latexmlc does, then answers its caller on standard input and output,
# one line each way:
#   in:  "convert SECONDS [SOURCE]" (one conversion of ./input.tex, or of ./SOURCE, a relative path of
#        plain names as conversion/warm.py checks it, in a child, with latexmlc's --timeout=SECONDS)
#   out: "started", then "exited STATUS" ($? of the child)
#   in:  "quit"                                       (ends it)
# It says "ready" once the session is prepared, or "failed WHY" and ends.
use strict;
use warnings;
use Cwd qw(cwd abs_path);
use POSIX ();
use LaTeXML;
use LaTeXML::Common::Config;
use LaTeXML::Common::Error;
use LaTeXML::Util::Pathname qw(pathname_directory pathname_mkdir);

my @options = @ARGV;
my $source  = './input.tex';
my $opts    = LaTeXML::Common::Config->new(input_limit => 100);
# LaTeX.pool, which every input of /convert loads (a formula's or a fragment's preamble begins a LaTeX
# document), is loaded once here with TeX.pool.
$opts->read(['--preload=LaTeX.pool', @options, $source]);
$LaTeXML::IDENTITY =~ s/^\S+/latexmlc/;    # the name latexmlc gives itself in the log
$opts->delete('source');
SetVerbosity($opts->get('verbosity'));
UseSTDERR();
# As latexmlc: the working directory is the base and the last search path.
my $cdir = abs_path(cwd());
$cdir =~ s/ /\\ /g;
$opts->set('base', $cdir) unless $opts->get('base');
push @{ $opts->get('paths') }, $cdir;
$opts->set('local', 1);
my $converter = LaTeXML->get_converter($opts);
$converter->prepare_session($opts);
if (!$$converter{ready}) {
  my $why = $$converter{log} // 'the session could not be prepared';
  $why =~ s/\s+/ /g;
  print "failed $why\n";
  exit 1; }
# The log of the preparation is complete in its file: the caller keeps it, to begin each conversion's log
# with it as latexmlc's does.
log_close();
# What every conversion's math parsing and post-processing load, loaded once here.
require LaTeXML::MathParser;
require LaTeXML::MathGrammar;
require Math::Trig;
require LaTeXML::Post;
require LaTeXML::Post::Scan;
require LaTeXML::Post::MakeBibliography;
require LaTeXML::Post::CrossRef;
require LaTeXML::Post::MathML::Presentation;
require LaTeXML::Post::MathML::Content;
require LaTeXML::Post::XSLT;
require LaTeXML::Post::Writer;
# One conversion of a fixed input of ours, in a daemon frame that is popped after it as latexmls does: what
# a first conversion builds lazily and keeps (compiled constructors, the parsed schema, loaded modules) is
# then built once here. Its log is dropped and its files go to a directory that is then removed.
{
  my $warmup = ($ENV{TMPDIR} // '/tmp') . '/.warm-up';
  mkdir($warmup);
  local $$converter{opts}{destination}   = "$warmup/warm-up.html";
  local $$converter{opts}{sitedirectory} = $warmup;
  local $$converter{opts}{log};
  my $whatsin = $opts->get('whatsin') // 'document';
  $converter->convert($whatsin eq 'document'
    ? 'literal:\\documentclass{article}\\begin{document}$x$\\end{document}' : 'literal:$x$');
  $converter->flush_log;
  log_close();
  system('rm', '-rf', $warmup); }

# Not dumpable: no other process of the sandbox's user (a conversion among them) may trace this one or
# read its memory; a child inherits it, which changes nothing for the child.
require 'sys/syscall.ph';
syscall(&SYS_prctl, 4, 0, 0, 0, 0) == 0 or die "prctl(PR_SET_DUMPABLE): $!\n";    # 4: PR_SET_DUMPABLE

$| = 1;
print "ready\n";
while (defined(my $line = <STDIN>)) {
  chomp $line;
  last if $line eq 'quit';
  my ($verb, $seconds, $file, @rest) = split(' ', $line);
  next unless $verb eq 'convert' && $seconds && $seconds =~ /^\d+$/ && !@rest;
  # The same pattern as warm.py's _SOURCE_NAME: plain names, none starting with `.` or `-`.
  next if defined $file
    && (length($file) > 255 || $file !~ m{\A[A-Za-z0-9_+][A-Za-z0-9_.+-]*(?:/[A-Za-z0-9_+][A-Za-z0-9_.+-]*)*\z});
  my $pid = fork();
  if (!defined $pid) {
    print "exited -1\n";
    next; }
  if ($pid == 0) {
    convert_one($seconds, defined $file ? "./$file" : $source);
    POSIX::_exit(70); }    # not reached
  print "started\n";
  waitpid($pid, 0);
  print "exited $?\n"; }
exit 0;

# One conversion, in the child: what latexmlc does after preparing its session.
sub convert_one {
  my ($seconds, $source) = @_;
  # The caller's channel stays with the parent; the child gets nothing to read and writes its noise apart.
  open(STDIN,  '<', '/dev/null');
  open(STDOUT, '>', '/dev/null');
  open(STDERR, '>', ($ENV{TMPDIR} // '/tmp') . '/.warm-stderr');
  setpgrp(0, 0);
  srand();
  $$converter{opts}{timeout} = $seconds;
  $0    = '/usr/bin/latexmlc';
  @ARGV = ((map { /^--timeout=/ ? "--timeout=$seconds" : $_ } @options), $source);
  # As latexmlc's option reading does: the destination's directory is made (the last conversion's files,
  # that one among them, were removed).
  if (my $destination = $converter->{opts}{destination}) {
    if (my $directory = pathname_directory($destination)) {
      pathname_mkdir($directory); } }
  my $code = eval {
    my $response = $converter->convert($source);
    my ($result, $status, $status_code, $log) = map { $$response{$_} } qw(result status status_code log);
    $status_code //= 3;
    $status      //= '';
    if ($log) {
      chomp($log);
      UseLog($converter->{opts}{log});
      NoteLog($log);
      UseLog(undef); }
    if ($result) {
      my $destination = $converter->{opts}{destination};
      if ($destination) {
        open(my $output, '>', $destination) or die "Fatal:I/O:forbidden Couldn't open output file $destination: $!";
        print $output $result;
        close $output; } }
    UseSTDERR(undef);
    ($status_code == 3 || $status =~ /fatal error/) ? 1 : 0; };
  if (!defined $code) {
    print STDERR $@;
    $code = 1; }
  # _exit runs no destructor of what the parent made (its temporary files among them): flush by hand.
  log_close();
  close(STDERR);
  POSIX::_exit($code); }

# Close LaTeXML's log file, however many times it was opened, so that all written to it is in the file.
sub log_close {
  if ($LaTeXML::Common::Error::LOG) {
    $LaTeXML::Common::Error::log_count = 1;
    UseLog(undef); }
  $LaTeXML::Common::Error::log_count = 0;
  return; }
