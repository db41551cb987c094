// Debian's cpp-httplib is a compiled library (libcpp-httplib.so) built with OpenSSL, zlib and
// Brotli support; its public structs (e.g. Request) change layout with these macros, so every
// includer must define them exactly like the library's pkg-config Cflags do.
#pragma once
#ifndef CPPHTTPLIB_OPENSSL_SUPPORT
#define CPPHTTPLIB_OPENSSL_SUPPORT
#endif
#ifndef CPPHTTPLIB_ZLIB_SUPPORT
#define CPPHTTPLIB_ZLIB_SUPPORT
#endif
#ifndef CPPHTTPLIB_BROTLI_SUPPORT
#define CPPHTTPLIB_BROTLI_SUPPORT
#endif
#include <httplib.h>
