// MobileNetV1's all-L3 graph order (../shared/models/mobilenetv1_train, Siracusa, Deeploy's training branch):
// one layer's tables in L2 and its closure that tiles it from L3 into L2, as generated
static PI_L2 uint16_t DeeployNetwork_TILING_CODEGEN_L2_node_12_features_features_4_conv_conv_3_Conv_GradConvGrad_0_ConvGrad_backward_ConvGradW_numTiles[2] = {0, 576};
static PI_L2 uint8_t DeeployNetwork_TILING_CODEGEN_L2_node_12_features_features_4_conv_conv_3_Conv_GradConvGrad_0_ConvGrad_backward_ConvGradW_data_in_stride_0[576] = {16, 24, 24, 24, 24, 24, 24, 24, 24, 24, 24, 24, 24, 24, 24, 24, 24, 24, 24, 24, 24, 24, 24, 24, 24, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 24, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 24, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 24, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 24, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 24, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 24, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 24, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 24, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 24, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 24, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 24, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 24, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 24, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 24, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 24, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 24, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 24, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 24, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 24, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 24, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 24, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 24, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36};
static PI_L2 uint8_t DeeployNetwork_TILING_CODEGEN_L2_node_12_features_features_4_conv_conv_3_Conv_GradConvGrad_0_ConvGrad_backward_ConvGradW_data_in_transfer_size[576] = {16, 24, 24, 24, 24, 24, 24, 24, 24, 24, 24, 24, 24, 24, 24, 24, 24, 24, 24, 24, 24, 24, 24, 24, 24, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 24, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 24, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 24, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 24, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 24, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 24, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 24, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 24, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 24, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 24, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 24, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 24, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 24, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 24, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 24, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 24, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 24, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 24, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 24, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 24, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 24, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 24, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36};
static PI_L2 uint8_t DeeployNetwork_TILING_CODEGEN_L2_node_12_features_features_4_conv_conv_3_Conv_GradConvGrad_0_ConvGrad_backward_ConvGradW_data_in_length[576] = {8, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 8, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 8, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 8, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 8, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 8, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 8, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 8, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 8, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 8, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 8, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 8, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 8, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 8, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 8, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 8, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 8, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 8, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 8, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 8, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 8, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 8, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 8, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 8, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12};
static PI_L2 uint8_t DeeployNetwork_TILING_CODEGEN_L2_node_12_features_features_4_conv_conv_3_Conv_GradConvGrad_0_ConvGrad_backward_ConvGradW_data_in_relativeOffset[576] = {4, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 12, 4, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 204, 4, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 204, 4, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 204, 4, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 204, 4, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 204, 4, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 204, 4, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 204, 4, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 204, 4, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 204, 4, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 204, 4, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 204, 4, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 204, 4, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 204, 4, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 204, 4, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 204, 4, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 204, 4, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 204, 4, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 204, 4, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 204, 4, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 204, 4, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 204, 4, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 204, 4, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 0};

static void _node_12_features_features_4_conv_conv_3_Conv_GradConvGrad_0_ConvGrad_backward_ConvGradW_closure_L3(void* _node_12_features_features_4_conv_conv_3_Conv_GradConvGrad_0_ConvGrad_backward_ConvGradW_closure_L3_args){
// CLOSURE ARG CAST
_node_12_features_features_4_conv_conv_3_Conv_GradConvGrad_0_ConvGrad_backward_ConvGradW_closure_L3_args_t* args = (_node_12_features_features_4_conv_conv_3_Conv_GradConvGrad_0_ConvGrad_backward_ConvGradW_closure_L3_args_t*) _node_12_features_features_4_conv_conv_3_Conv_GradConvGrad_0_ConvGrad_backward_ConvGradW_closure_L3_args;

uint32_t* DeeployNetwork_TILING_CODEGEN_L1_node_12_features_features_4_conv_conv_3_Conv_GradConvGrad_0_ConvGrad_backward_ConvGradW_tileIdxPtr = args->DeeployNetwork_TILING_CODEGEN_L1_node_12_features_features_4_conv_conv_3_Conv_GradConvGrad_0_ConvGrad_backward_ConvGradW_tileIdxPtr;
float32_t* DeeployNetwork_TILING_CODEGEN_L2_node_12_features_features_4_conv_conv_3_Conv_GradConvGrad_0_ConvGrad_backward_ConvGradW_data_in_ref = args->DeeployNetwork_TILING_CODEGEN_L2_node_12_features_features_4_conv_conv_3_Conv_GradConvGrad_0_ConvGrad_backward_ConvGradW_data_in_ref;
float32_t* DeeployNetwork_TILING_CODEGEN_L2_node_12_features_features_4_conv_conv_3_Conv_GradConvGrad_0_ConvGrad_backward_ConvGradW_grad_out_ref = args->DeeployNetwork_TILING_CODEGEN_L2_node_12_features_features_4_conv_conv_3_Conv_GradConvGrad_0_ConvGrad_backward_ConvGradW_grad_out_ref;
float32_t* DeeployNetwork_TILING_CODEGEN_L2_node_12_features_features_4_conv_conv_3_Conv_GradConvGrad_0_ConvGrad_backward_ConvGradW_grad_weight_ref = args->DeeployNetwork_TILING_CODEGEN_L2_node_12_features_features_4_conv_conv_3_Conv_GradConvGrad_0_ConvGrad_backward_ConvGradW_grad_weight_ref;
uint16_t* DeeployNetwork_TILING_CODEGEN_L2_node_12_features_features_4_conv_conv_3_Conv_GradConvGrad_0_ConvGrad_backward_ConvGradW_tileIdxPtr = args->DeeployNetwork_TILING_CODEGEN_L2_node_12_features_features_4_conv_conv_3_Conv_GradConvGrad_0_ConvGrad_backward_ConvGradW_tileIdxPtr;
float32_t* DeeployNetwork_TILING_CODEGEN_L2_node_12_features_features_4_conv_conv_3_Conv_GradConvGrad_0_ConvGrad_backward_ConvGradW_node_0_features_features_4_conv_conv_2_Relu__0_tensor_ref = args->DeeployNetwork_TILING_CODEGEN_L2_node_12_features_features_4_conv_conv_3_Conv_GradConvGrad_0_ConvGrad_backward_ConvGradW_node_0_features_features_4_conv_conv_2_Relu__0_tensor_ref;
float32_t* DeeployNetwork_TILING_CODEGEN_L2_node_12_features_features_4_conv_conv_3_Conv_GradConvGrad_0_ConvGrad_backward_ConvGradW_node_0_features_features_4_conv_conv_3_Conv__0_grad_tensor_ref = args->DeeployNetwork_TILING_CODEGEN_L2_node_12_features_features_4_conv_conv_3_Conv_GradConvGrad_0_ConvGrad_backward_ConvGradW_node_0_features_features_4_conv_conv_3_Conv__0_grad_tensor_ref;
float32_t* DeeployNetwork_TILING_CODEGEN_L2_node_12_features_features_4_conv_conv_3_Conv_GradConvGrad_0_ConvGrad_backward_ConvGradW_features_4_conv_3_weight_grad_tensor_ref = args->DeeployNetwork_TILING_CODEGEN_L2_node_12_features_features_4_conv_conv_3_Conv_GradConvGrad_0_ConvGrad_backward_ConvGradW_features_4_conv_3_weight_grad_tensor_ref;

// CLOSURE FUNCTION CALL

// Initialize DMA futures
pi_cl_ram_req_t grad_out_ExternalToLocal = {0};
pi_cl_ram_req_t data_in_ExternalToLocal = {0};
pi_cl_ram_req_t grad_weight_LocalToExternal = {0};

    // TILING LOOP
    for (int TILING_I=DeeployNetwork_TILING_CODEGEN_L2_node_12_features_features_4_conv_conv_3_Conv_GradConvGrad_0_ConvGrad_backward_ConvGradW_numTiles[*DeeployNetwork_TILING_CODEGEN_L2_node_12_features_features_4_conv_conv_3_Conv_GradConvGrad_0_ConvGrad_backward_ConvGradW_tileIdxPtr]; TILING_I<DeeployNetwork_TILING_CODEGEN_L2_node_12_features_features_4_conv_conv_3_Conv_GradConvGrad_0_ConvGrad_backward_ConvGradW_numTiles[(*DeeployNetwork_TILING_CODEGEN_L2_node_12_features_features_4_conv_conv_3_Conv_GradConvGrad_0_ConvGrad_backward_ConvGradW_tileIdxPtr)+1]; TILING_I++){
    

// Transfer input tiles

for (uint32_t i_0 = 0; i_0 < 30; i_0++) {
const uint32_t ext_offset = i_0 * 9216;
const uint32_t loc_offset = i_0 * DeeployNetwork_TILING_CODEGEN_L2_node_12_features_features_4_conv_conv_3_Conv_GradConvGrad_0_ConvGrad_backward_ConvGradW_data_in_stride_0[TILING_I];
void * const local_buffer_offsetted = (void *)((char *)DeeployNetwork_TILING_CODEGEN_L2_node_12_features_features_4_conv_conv_3_Conv_GradConvGrad_0_ConvGrad_backward_ConvGradW_data_in_ref + loc_offset);
void * const external_buffer_offsetted = (void *)((char *)DeeployNetwork_TILING_CODEGEN_L2_node_12_features_features_4_conv_conv_3_Conv_GradConvGrad_0_ConvGrad_backward_ConvGradW_node_0_features_features_4_conv_conv_2_Relu__0_tensor_ref + ext_offset);

pi_cl_ram_copy_2d(get_ram_ptr(), external_buffer_offsetted, local_buffer_offsetted, DeeployNetwork_TILING_CODEGEN_L2_node_12_features_features_4_conv_conv_3_Conv_GradConvGrad_0_ConvGrad_backward_ConvGradW_data_in_transfer_size[TILING_I], 192, DeeployNetwork_TILING_CODEGEN_L2_node_12_features_features_4_conv_conv_3_Conv_GradConvGrad_0_ConvGrad_backward_ConvGradW_data_in_length[TILING_I], 1, &data_in_ExternalToLocal);

    if (data_in_ExternalToLocal.size != 0) {
        pi_cl_ram_copy_wait(&data_in_ExternalToLocal);
    }
}

    // UPDATE VARIABLE DeeployNetwork_TILING_CODEGEN_L2_node_12_features_features_4_conv_conv_3_Conv_GradConvGrad_0_ConvGrad_backward_ConvGradW_node_0_features_features_4_conv_conv_2_Relu__0_tensor_ref
    DeeployNetwork_TILING_CODEGEN_L2_node_12_features_features_4_conv_conv_3_Conv_GradConvGrad_0_ConvGrad_backward_ConvGradW_node_0_features_features_4_conv_conv_2_Relu__0_tensor_ref = (float32_t*)((char*)(DeeployNetwork_TILING_CODEGEN_L2_node_12_features_features_4_conv_conv_3_Conv_GradConvGrad_0_ConvGrad_backward_ConvGradW_node_0_features_features_4_conv_conv_2_Relu__0_tensor_ref) + DeeployNetwork_TILING_CODEGEN_L2_node_12_features_features_4_conv_conv_3_Conv_GradConvGrad_0_ConvGrad_backward_ConvGradW_data_in_relativeOffset[TILING_I]);
    

for (uint32_t i_0 = 0; i_0 < 30; i_0++) {
const uint32_t ext_offset = i_0 * 2304;
const uint32_t loc_offset = i_0 * 4;
void * const local_buffer_offsetted = (void *)((char *)DeeployNetwork_TILING_CODEGEN_L2_node_12_features_features_4_conv_conv_3_Conv_GradConvGrad_0_ConvGrad_backward_ConvGradW_grad_out_ref + loc_offset);
void * const external_buffer_offsetted = (void *)((char *)DeeployNetwork_TILING_CODEGEN_L2_node_12_features_features_4_conv_conv_3_Conv_GradConvGrad_0_ConvGrad_backward_ConvGradW_node_0_features_features_4_conv_conv_3_Conv__0_grad_tensor_ref + ext_offset);

pi_cl_ram_copy_2d(get_ram_ptr(), external_buffer_offsetted, local_buffer_offsetted, 4, 96, 4, 1, &grad_out_ExternalToLocal);

    if (grad_out_ExternalToLocal.size != 0) {
        pi_cl_ram_copy_wait(&grad_out_ExternalToLocal);
    }
}

    // UPDATE VARIABLE DeeployNetwork_TILING_CODEGEN_L2_node_12_features_features_4_conv_conv_3_Conv_GradConvGrad_0_ConvGrad_backward_ConvGradW_node_0_features_features_4_conv_conv_3_Conv__0_grad_tensor_ref
    DeeployNetwork_TILING_CODEGEN_L2_node_12_features_features_4_conv_conv_3_Conv_GradConvGrad_0_ConvGrad_backward_ConvGradW_node_0_features_features_4_conv_conv_3_Conv__0_grad_tensor_ref = (float32_t*)((char*)(DeeployNetwork_TILING_CODEGEN_L2_node_12_features_features_4_conv_conv_3_Conv_GradConvGrad_0_ConvGrad_backward_ConvGradW_node_0_features_features_4_conv_conv_3_Conv__0_grad_tensor_ref) + 4);
    

// Wait for input tiles

    if (grad_out_ExternalToLocal.size != 0) {
        pi_cl_ram_copy_wait(&grad_out_ExternalToLocal);
    }

    if (data_in_ExternalToLocal.size != 0) {
        pi_cl_ram_copy_wait(&data_in_ExternalToLocal);
    }
_node_12_features_features_4_conv_conv_3_Conv_GradConvGrad_0_ConvGrad_backward_ConvGradW_closure_args_t DeeployNetwork__node_12_features_features_4_conv_conv_3_Conv_GradConvGrad_0_ConvGrad_backward_ConvGradW_closure_args = (_node_12_features_features_4_conv_conv_3_Conv_GradConvGrad_0_ConvGrad_backward_ConvGradW_closure_args_t) {.DeeployNetwork_TILING_CODEGEN_L1_node_12_features_features_4_conv_conv_3_Conv_GradConvGrad_0_ConvGrad_backward_ConvGradW_tileIdxPtr = DeeployNetwork_TILING_CODEGEN_L1_node_12_features_features_4_conv_conv_3_Conv_GradConvGrad_0_ConvGrad_backward_ConvGradW_tileIdxPtr, .DeeployNetwork_TILING_CODEGEN_L2_node_12_features_features_4_conv_conv_3_Conv_GradConvGrad_0_ConvGrad_backward_ConvGradW_data_in_ref = DeeployNetwork_TILING_CODEGEN_L2_node_12_features_features_4_conv_conv_3_Conv_GradConvGrad_0_ConvGrad_backward_ConvGradW_data_in_ref, .DeeployNetwork_TILING_CODEGEN_L2_node_12_features_features_4_conv_conv_3_Conv_GradConvGrad_0_ConvGrad_backward_ConvGradW_grad_out_ref = DeeployNetwork_TILING_CODEGEN_L2_node_12_features_features_4_conv_conv_3_Conv_GradConvGrad_0_ConvGrad_backward_ConvGradW_grad_out_ref, .DeeployNetwork_TILING_CODEGEN_L2_node_12_features_features_4_conv_conv_3_Conv_GradConvGrad_0_ConvGrad_backward_ConvGradW_grad_weight_ref = DeeployNetwork_TILING_CODEGEN_L2_node_12_features_features_4_conv_conv_3_Conv_GradConvGrad_0_ConvGrad_backward_ConvGradW_grad_weight_ref};

// _node_12_features_features_4_conv_conv_3_Conv_GradConvGrad_0_ConvGrad_backward_ConvGradW_closure CLOSURE CALL
_node_12_features_features_4_conv_conv_3_Conv_GradConvGrad_0_ConvGrad_backward_ConvGradW_closure(&DeeployNetwork__node_12_features_features_4_conv_conv_3_Conv_GradConvGrad_0_ConvGrad_backward_ConvGradW_closure_args);


// Transfer output tiles


pi_cl_ram_copy_2d(get_ram_ptr(), DeeployNetwork_TILING_CODEGEN_L2_node_12_features_features_4_conv_conv_3_Conv_GradConvGrad_0_ConvGrad_backward_ConvGradW_features_4_conv_3_weight_grad_tensor_ref, DeeployNetwork_TILING_CODEGEN_L2_node_12_features_features_4_conv_conv_3_Conv_GradConvGrad_0_ConvGrad_backward_ConvGradW_grad_weight_ref, 1080, 1080, 1080, 0, &grad_weight_LocalToExternal);

    if (grad_weight_LocalToExternal.size != 0) {
        pi_cl_ram_copy_wait(&grad_weight_LocalToExternal);
    }

// Wait for output tiles

    if (grad_weight_LocalToExternal.size != 0) {
        pi_cl_ram_copy_wait(&grad_weight_LocalToExternal);
    }

    // CLOSE TILING LOOP
    }
    *DeeployNetwork_TILING_CODEGEN_L2_node_12_features_features_4_conv_conv_3_Conv_GradConvGrad_0_ConvGrad_backward_ConvGradW_tileIdxPtr += 1;
    

// Deinitialize DMA futures




// CLOSURE ARG WRITEBACK
}
