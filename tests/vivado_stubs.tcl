# Stand-ins for the Vivado Tcl commands that specgen's flow uses, for plain tclsh.
#
# Each stub checks what Vivado would refuse or what would make the flow wrong:
# an unknown option, a missing input file, a missing output folder, a command
# before the one it depends on, a bus interface declared twice, a port map to
# a port the top module does not have. Each call appends one line to the log:
# the command name and its arguments, separated by the ASCII unit separator.
#
# The caller sets, before sourcing this file:
#   stub_log    path of the call log
#   stub_ports  the top module's port names
# A command the flow misspells is not defined here, so tclsh stops on it.

namespace eval ::ipx {}
namespace eval ::stub {
    variable done
    array set done {}
    variable busifs {}
    variable inferred {}
    variable in_xdc 0
}

proc ::stub::log {name arglist} {
    set f [open $::stub_log a]
    puts $f [join [concat [list $name] $arglist] "\x1f"]
    close $f
}

# Options each command accepts; any other -word is an error, as in Vivado.
array set ::stub::options {
    read_verilog {-sv -library}
    read_xdc {-mode -unmanaged -ref -cells}
    synth_design {-mode -part -top -flatten_hierarchy -directive}
    write_checkpoint {-force}
    report_utilization {-hierarchical -file -hierarchical_depth}
    report_timing_summary {-max_paths -report_unconstrained -file -delay_type}
    report_design_analysis {-logic_level_distribution -file}
    report_drc {-file -ruledecks -name}
    report_methodology {-file -checks -name}
    report_power {-file -name}
    opt_design {-directive}
    place_design {-directive}
    route_design {-directive}
    close_design {}
    create_project {-force -part -in_memory}
    add_files {-norecurse -fileset}
    set_property {-dict -objects}
    current_fileset {}
    update_compile_order {-fileset}
    ipx::package_project {-root_dir -vendor -library -taxonomy -import_files -set_current -force}
    ipx::current_core {}
    ipx::get_bus_interfaces {-of_objects}
    ipx::remove_bus_interface {}
    ipx::add_bus_interface {}
    ipx::add_port_map {}
    ipx::add_bus_parameter {}
    ipx::add_memory_map {}
    ipx::add_address_block {}
    ipx::add_address_space {}
    ipx::add_register {}
    ipx::create_xgui_files {}
    ipx::update_checksums {}
    ipx::check_integrity {}
    ipx::save_core {}
    close_project {}
    create_clock {-name -period -waveform -add}
    get_ports {-filter -quiet}
    set_input_delay {-clock -max -min -add_delay}
    set_output_delay {-clock -max -min -add_delay}
    get_clocks {-of_objects -filter -quiet}
    set_max_delay {-datapath_only -from -to -through}
    get_property {}
}

proc ::stub::check_options {name arglist} {
    foreach a $arglist {
        if {[string match -* $a] && ![string is double -strict $a]
                && [lsearch -exact $::stub::options($name) $a] < 0} {
            error "$name: unknown option '$a'"
        }
    }
}

# Positional arguments: the words that are neither options nor option values.
proc ::stub::positional {arglist valued} {
    set out {}
    for {set i 0} {$i < [llength $arglist]} {incr i} {
        set a [lindex $arglist $i]
        if {[lsearch -exact $valued $a] >= 0} { incr i; continue }
        if {[string match -* $a]} { continue }
        lappend out $a
    }
    return $out
}

proc ::stub::option {arglist opt} {
    set i [lsearch -exact $arglist $opt]
    if {$i < 0} { error "missing option $opt" }
    return [lindex $arglist [expr {$i + 1}]]
}

proc ::stub::need {name args} {
    foreach step $args {
        if {![info exists ::stub::done($step)]} { error "$name before $step" }
    }
}

proc ::stub::refuse_after {name args} {
    foreach step $args {
        if {[info exists ::stub::done($step)]} { error "$name after $step" }
    }
}

proc ::stub::require_file {name path} {
    if {![file isfile $path]} { error "$name: no such file: $path" }
}

proc ::stub::require_dir_of {name path} {
    if {![file isdirectory [file dirname $path]]} {
        error "$name: folder of $path does not exist"
    }
}

# Define a stub: the body runs with `name` and `arglist` set, after the option
# check; its last command's value is the stub's result (a `return` in the body
# would skip the bookkeeping). The call is logged before the body runs.
proc ::stub::define {name body} {
    proc ::$name args [string map [list @NAME@ $name @BODY@ $body] {
        set name @NAME@
        set arglist $args
        ::stub::check_options $name $arglist
        ::stub::log $name $arglist
        set result [eval {@BODY@}]
        set ::stub::done($name) 1
        return $result
    }]
}

# --- Non-project flow ------------------------------------------------------

::stub::define read_verilog {
    ::stub::refuse_after $name synth_design
    foreach f [::stub::positional $arglist {-library}] { ::stub::require_file $name $f }
}
::stub::define read_xdc {
    ::stub::refuse_after $name synth_design
    set files [::stub::positional $arglist {-mode -ref -cells}]
    foreach f $files {
        ::stub::require_file $name $f
        set ::stub::in_xdc 1
        uplevel #0 [list source $f]
        set ::stub::in_xdc 0
    }
}
::stub::define synth_design {
    ::stub::need $name read_verilog read_xdc
    ::stub::option $arglist -part
    ::stub::option $arglist -top
}
::stub::define write_checkpoint {
    ::stub::need $name synth_design
    foreach f [::stub::positional $arglist {}] { ::stub::require_dir_of $name $f }
}
foreach cmd {report_utilization report_timing_summary report_design_analysis
             report_methodology} {
    ::stub::define $cmd {
        ::stub::need $name synth_design
        ::stub::require_dir_of $name [::stub::option $arglist -file]
    }
}
# Design rules and power are checked on the routed design.
foreach cmd {report_drc report_power} {
    ::stub::define $cmd {
        ::stub::need $name route_design
        ::stub::require_dir_of $name [::stub::option $arglist -file]
    }
}
::stub::define opt_design { ::stub::need $name synth_design }
::stub::define place_design { ::stub::need $name opt_design }
::stub::define route_design { ::stub::need $name place_design }
::stub::define close_design { ::stub::need $name synth_design }

# --- XDC -------------------------------------------------------------------

::stub::define get_ports {
    if {!$::stub::in_xdc} { error "get_ports outside an XDC file" }
    set names [::stub::positional $arglist {-filter}]
    # A name may be a list of them ({rst s_axi__wdata[*]}), a bus's bits as name[*].
    foreach p [concat {*}$names] {
        regsub {\[\*\]$} $p {} base
        if {[lsearch -exact $::stub_ports $base] < 0} { error "get_ports: no port '$base' on the top" }
    }
    set r [concat port: $names]
}
::stub::define create_clock {
    ::stub::option $arglist -period
    ::stub::option $arglist -name
}
foreach cmd {set_input_delay set_output_delay} {
    ::stub::define $cmd {
        ::stub::need $name create_clock
        ::stub::option $arglist -clock
    }
}
# A clock named here must have been created before (XDC is read in order).
::stub::define get_clocks {
    if {!$::stub::in_xdc} { error "get_clocks outside an XDC file" }
    ::stub::need $name create_clock
    set names [::stub::positional $arglist {-filter}]
    set r [concat clock: $names]
}
::stub::define set_max_delay {
    ::stub::need $name create_clock
    ::stub::option $arglist -from
    ::stub::option $arglist -to
}

# --- Project and IP packaging ----------------------------------------------

::stub::define create_project {
    ::stub::refuse_after $name project_open
    set ::stub::done(project_open) 1
    set dir [lindex [::stub::positional $arglist {-part}] 1]
    file mkdir $dir
}
::stub::define add_files {
    ::stub::need $name create_project
    foreach group [::stub::positional $arglist {-fileset}] {
        foreach f $group { ::stub::require_file $name $f }
    }
}
::stub::define current_fileset { set r sources_1 }
::stub::define update_compile_order { ::stub::need $name add_files }
::stub::define set_property {
    set pos [::stub::positional $arglist {}]
    if {[llength $pos] != 3} { error "set_property: expected NAME VALUE OBJECTS, got $pos" }
    lassign $pos prop value obj
    if {$prop eq "physical_name" && [lsearch -exact $::stub_ports $value] < 0} {
        error "set_property physical_name: no port '$value' on the top"
    }
    if {$prop eq "top"} { set ::stub::done(top_set) 1 }
}
::stub::define get_property { lindex $arglist 1 }
::stub::define ipx::package_project {
    ::stub::need $name update_compile_order top_set
    ::stub::require_dir_of $name [::stub::option $arglist -root_dir]
    # Pretend the packager inferred interfaces from the names; the flow must replace them.
    set ::stub::busifs {inferred_clk inferred_rst}
}
::stub::define ipx::current_core { ::stub::need $name ipx::package_project; set r core0 }
::stub::define ipx::get_bus_interfaces {
    ::stub::need $name ipx::package_project
    set r $::stub::busifs
}
::stub::define ipx::remove_bus_interface {
    set busif [lindex $arglist 0]
    set i [lsearch -exact $::stub::busifs $busif]
    if {$i < 0} { error "ipx::remove_bus_interface: no interface '$busif'" }
    set ::stub::busifs [lreplace $::stub::busifs $i $i]
}
::stub::define ipx::add_bus_interface {
    ::stub::need $name ipx::package_project
    set busif [lindex $arglist 0]
    if {[lsearch -exact $::stub::busifs $busif] >= 0} {
        error "ipx::add_bus_interface: interface '$busif' exists already"
    }
    lappend ::stub::busifs $busif
    set r $busif
}
foreach cmd {ipx::add_port_map ipx::add_bus_parameter ipx::add_memory_map
             ipx::add_address_block ipx::add_address_space} {
    ::stub::define $cmd {
        ::stub::need $name ipx::add_bus_interface
        set r "$name:[join $arglist :]"
    }
}
::stub::define ipx::add_register {
    ::stub::need $name ipx::add_address_block
    set r "$name:[join $arglist :]"
}
::stub::define ipx::create_xgui_files { ::stub::need $name ipx::package_project }
::stub::define ipx::update_checksums { ::stub::need $name ipx::create_xgui_files }
::stub::define ipx::check_integrity { ::stub::need $name ipx::update_checksums }
::stub::define ipx::save_core { ::stub::need $name ipx::check_integrity }
::stub::define close_project {
    ::stub::need $name create_project
    if {[llength [lsearch -all -glob $::stub::busifs inferred*]]} {
        error "close_project: inferred interfaces were never replaced"
    }
}
