# Filters the output of `go build -ldflags '-linkmode external -extldflags -static'`
# (make build-static) for the notes glibc's static archive attaches to its name-service
# functions, and only those:
#
#   /usr/bin/ld: ...o: in function `mygetpwuid_r':
#   ...: warning: Using 'getpwuid_r' in statically linked applications requires at
#        runtime the shared libraries from the glibc version used for linking
#
# They are expected: os/user (cgo) and net's cgo resolver reference these functions,
# and a static binary can only call them where glibc's NSS modules of the same version
# exist. The nodes in the FROM-scratch images never need them: Go's own resolver serves
# host names (there is no nsswitch.conf asking for anything else) and the os/user
# callers in the dependency graph (keyring D-Bus, cloud credential helpers) are not on a
# node's path. Any other line, any other warning and any other function passes through,
# and the build's exit status is the pipeline's (the Makefile sets pipefail).
BEGIN {
	fns = "getaddrinfo getnameinfo gethostbyname gethostbyname2 gethostbyname_r gethostbyname2_r " \
	      "getpwuid_r getpwnam_r getgrgid_r getgrnam_r getgrouplist"
	split(fns, a, " ")
	for (i in a) known[a[i]] = 1
}
{ lines[NR] = $0 }
END {
	for (i = 1; i <= NR; i++) {
		if (match(lines[i], /warning: Using '[a-z0-9_]+' in statically linked applications requires at runtime the shared libraries from the glibc version used for linking$/)) {
			fn = lines[i]
			sub(/.*warning: Using '/, "", fn)
			sub(/'.*/, "", fn)
			if (fn in known) {
				drop[i] = 1
				if (i > 1 && lines[i-1] ~ /: in function `[^']*':$/) drop[i-1] = 1
			}
		}
	}
	# go prints "# <package>" before the linker's output; drop it when nothing of that
	# output is left.
	for (i = 1; i <= NR; i++) {
		if (lines[i] ~ /^# / && !(i in drop)) {
			rest = 0
			for (j = i + 1; j <= NR && lines[j] !~ /^# /; j++) if (!(j in drop)) rest = 1
			if (!rest) drop[i] = 1
		}
	}
	for (i = 1; i <= NR; i++) if (!(i in drop)) print lines[i]
}
