# One place for the compile flags every target of ours gets: warnings (errors in CI), and the
# sanitizer build the test command runs too.
add_library(topoaware_flags INTERFACE)
target_compile_options(topoaware_flags INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wcast-align -Woverloaded-virtual
  -Wformat=2 -Wimplicit-fallthrough)
if(TOPOAWARE_WERROR)
  target_compile_options(topoaware_flags INTERFACE -Werror)
endif()
if(TOPOAWARE_SANITIZE)
  target_compile_options(topoaware_flags INTERFACE -fsanitize=address,undefined
    -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  target_link_options(topoaware_flags INTERFACE -fsanitize=address,undefined)
endif()
if(TOPOAWARE_FUZZ)
  # Coverage for libFuzzer on everything of ours (the fuzz binaries add the fuzzer's main), and
  # the sanitizers that turn a silent memory error into a finding.
  target_compile_options(topoaware_flags INTERFACE -fsanitize=fuzzer-no-link,address,undefined
    -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  target_link_options(topoaware_flags INTERFACE -fsanitize=address,undefined)
endif()
install(TARGETS topoaware_flags EXPORT topoawareTargets)
